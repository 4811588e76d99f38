import EventProtocol
import EventServer

/// Who is recording a video to whom right now: an **ephemeral** area of state, served by its own update
/// machine beside the durable video machine (seed 003's "several update machines for different areas of
/// state, with different properties"; `docs/video-messaging.md`, "Two machines").
///
/// A recording is announced when the sender starts and ends when they stop, send, or go quiet for
/// ``staleAfter`` (a client that died mid-recording): the server ends it on its own clock. Nothing here is
/// worth keeping: the client holds it in memory only, with a short queue lifespan, and a lost queue costs a
/// registration of a few bytes.
public struct RecordingPresence: ServerApplication, Codable, Equatable {
  /// Recordings under way: recipient → sender → when the recording ends unless renewed.
  public private(set) var recordings: [UserID: [UserID: Timestamp]] = [:]
  /// How long a recording lasts without a renewal.
  public var staleAfter: Duration = .seconds(30)
  var clock = Timestamp(sinceEpoch: .zero)

  /// No recording under way.
  public init(staleAfter: Duration = .seconds(30)) {
    self.staleAfter = staleAfter
  }

  public func snapshot(for user: UserID) -> PresenceSnapshot {
    PresenceSnapshot(recordingToMe: (recordings[user] ?? [:]).keys.sorted())
  }

  public mutating func handle(
    _ command: PresenceCommand,
    from user: UserID
  ) throws(CommandRejection) -> [Delivery<PresenceEvent>] {
    try handle(command, from: user, at: clock)
  }

  public mutating func handle(
    _ command: PresenceCommand,
    from user: UserID,
    at now: Timestamp
  ) throws(CommandRejection) -> [Delivery<PresenceEvent>] {
    clock = max(clock, now)
    switch command {
    case .recording(let recipient):
      guard recipient != user else { throw CommandRejection("recording to yourself is not announced") }
      let isNew = recordings[recipient]?[user] == nil
      recordings[recipient, default: [:]][user] = clock.advanced(by: staleAfter)
      return isNew ? [Delivery(to: [recipient], event: .recording(PresenceChange(sender: user, active: true)))] : []
    case .stopped(let recipient):
      guard recordings[recipient]?.removeValue(forKey: user) != nil else { return [] }
      if recordings[recipient]?.isEmpty == true { recordings[recipient] = nil }
      return [Delivery(to: [recipient], event: .recording(PresenceChange(sender: user, active: false)))]
    }
  }

  public var nextDeadline: Timestamp? {
    recordings.values.flatMap(\.values).min()
  }

  public mutating func deadlineReached(at now: Timestamp) -> [Delivery<PresenceEvent>] {
    clock = max(clock, now)
    var deliveries: [Delivery<PresenceEvent>] = []
    for recipient in recordings.keys.sorted() {
      for (sender, end) in recordings[recipient]!.sorted(by: { $0.key < $1.key }) where end <= now {
        recordings[recipient]![sender] = nil
        deliveries.append(Delivery(to: [recipient], event: .recording(PresenceChange(sender: sender, active: false))))
      }
      if recordings[recipient]!.isEmpty { recordings[recipient] = nil }
    }
    return deliveries
  }
}

/// What a user's presence machine shows: who is recording a video to them now.
public struct PresenceSnapshot: Codable, Sendable, Equatable {
  /// The senders recording to the user, sorted.
  public var recordingToMe: [UserID]

  /// Creates a PresenceSnapshot from its parts.
  public init(recordingToMe: [UserID] = []) {
    self.recordingToMe = recordingToMe
  }
}

/// What a sender's app tells the presence server.
public enum PresenceCommand: Codable, Sendable, Equatable {
  /// Recording to `recipient` (started, or still going: send it again within `staleAfter`).
  case recording(to: UserID)
  /// Stopped recording to `recipient` (sent or abandoned).
  case stopped(to: UserID)
}

/// A recording started or ended.
public struct PresenceChange: Codable, Sendable, Hashable {
  /// Who is recording.
  public var sender: UserID
  /// Whether the recording is under way.
  public var active: Bool

  /// Creates a PresenceChange from its parts.
  public init(sender: UserID, active: Bool) {
    self.sender = sender
    self.active = active
  }
}

/// The presence machine's one event type, `recording`.
public enum PresenceEvent: TaggedEventPayload, Hashable {
  /// A recording to the user started or ended.
  case recording(PresenceChange)

  public static let cases = [EventCase("recording", Self.recording)]
}
