import EventProtocol

/// Which installations get push notifications, and when: the server core's push bookkeeping.
///
/// Each installation (a user's client id) registers a token, independent of any queue. When an event is
/// queued for its user and the installation is not long-polling, it is due a push; pushes are coalesced to
/// at most one per ``EventServerConfiguration/pushInterval`` per installation, and a coalesced push is
/// composed when it is sent, so the last one brings the device fully up to date. A token the platform
/// reports invalid is dropped.
///
/// ```swift
/// var registry = PushRegistry()
/// registry.register(token: "apns-1", for: installation)
/// registry.eventsQueued(for: installation, now: t0, interval: .seconds(10))   // .sendNow
/// ```
public struct PushRegistry: Sendable, Equatable {
  /// One installation's registration and its coalescing state.
  public struct Entry: Sendable, Hashable, Codable {
    /// The platform token to push to.
    public var token: PushToken
    /// The platform that issued it, when the installation said.
    public var platform: PushPlatform?
    /// When the last push to it was sent.
    public var lastSentAt: Timestamp?
    /// When a coalesced push is due, if one is waiting.
    public var dueAt: Timestamp?
  }

  /// What to do for an installation whose user got events.
  public enum Decision: Sendable, Equatable {
    /// Nothing: it has no token.
    case none
    /// Send a push now.
    case sendNow
    /// A push is due at `dueAt` (coalesced with others).
    case deferred(until: Timestamp)
  }

  /// The registrations, by installation.
  public private(set) var entries: [MutationSource: Entry] = [:]
  /// Each user's installations with a token, sorted: what a delivery looks up.
  private var clientsByUser: [UserID: [ClientID]] = [:]
  /// When each waiting coalesced push is due: few at a time, so the earliest is found without visiting every
  /// registration.
  private var dueAt: [MutationSource: Timestamp] = [:]

  /// Whether no installation has a token.
  public var isEmpty: Bool { entries.isEmpty }

  /// An empty registry.
  public init() {}

  /// Registers (or replaces) the token of an installation.
  public mutating func register(token: PushToken, platform: PushPlatform? = nil, for installation: MutationSource) {
    if entries[installation] == nil { index(installation) }
    entries[installation] = Entry(
      token: token,
      platform: platform,
      lastSentAt: entries[installation]?.lastSentAt,
      dueAt: nil
    )
    dueAt[installation] = nil
  }

  private mutating func index(_ installation: MutationSource) {
    var clients = clientsByUser[installation.user, default: []]
    clients.insert(
      installation.clientID,
      at: clients.firstIndex { $0.rawValue > installation.clientID.rawValue } ?? clients.endIndex
    )
    clientsByUser[installation.user] = clients
  }

  private mutating func unindex(_ installation: MutationSource) {
    clientsByUser[installation.user]?.removeAll { $0 == installation.clientID }
    if clientsByUser[installation.user]?.isEmpty == true { clientsByUser[installation.user] = nil }
    dueAt[installation] = nil
  }

  /// Drops every installation using `token` (the platform said it is no longer valid).
  /// - Returns: The installations dropped.
  @discardableResult
  public mutating func tokenInvalid(_ token: PushToken) -> [MutationSource] {
    let dropped = entries.filter { $0.value.token == token }.map(\.key).sorted()
    for installation in dropped {
      entries[installation] = nil
      unindex(installation)
    }
    return dropped
  }

  /// The installations of `user` that have a token, in a stable order.
  public func installations(of user: UserID) -> [MutationSource] {
    (clientsByUser[user] ?? []).map { MutationSource(user: user, clientID: $0) }
  }

  /// An event was queued for the installation's user while it was not long-polling.
  public mutating func eventsQueued(for installation: MutationSource, now: Timestamp, interval: Duration) -> Decision {
    guard var entry = entries[installation] else { return .none }
    defer { entries[installation] = entry }
    if let dueAt = entry.dueAt { return .deferred(until: dueAt) }
    if let lastSentAt = entry.lastSentAt, lastSentAt.advanced(by: interval) > now {
      let due = lastSentAt.advanced(by: interval)
      entry.dueAt = due
      dueAt[installation] = due
      return .deferred(until: due)
    }
    entry.lastSentAt = now
    return .sendNow
  }

  /// The installation was served by a long-poll: a waiting push is no longer needed.
  public mutating func servedByPoll(_ installation: MutationSource) {
    entries[installation]?.dueAt = nil
    dueAt[installation] = nil
  }

  /// The installations whose coalesced push is due at `now`; each is marked sent.
  public mutating func duePushes(now: Timestamp) -> [MutationSource] {
    var due: [MutationSource] = []
    for (installation, time) in dueAt where time <= now { due.append(installation) }
    guard !due.isEmpty else { return [] }
    due.sort()
    for installation in due {
      entries[installation]?.dueAt = nil
      dueAt[installation] = nil
      entries[installation]?.lastSentAt = now
    }
    return due
  }

  /// The earliest time a coalesced push is due.
  /// - Complexity: O(*d*) in the pushes waiting, not in the registrations.
  public var nextDueAt: Timestamp? { dueAt.values.min() }

  /// The registrations as dump records, sorted.
  public var records: [PushRecord] {
    entries.sorted { $0.key < $1.key }.map {
      PushRecord(installation: $0.key, token: $0.value.token, platform: $0.value.platform)
    }
  }

  /// A registry holding `records` (nothing due, nothing sent yet).
  public init(records: [PushRecord]) {
    for record in records {
      if entries[record.installation] == nil { index(record.installation) }
      entries[record.installation] = Entry(token: record.token, platform: record.platform)
    }
  }
}

extension PushRegistry.Entry {
  init(token: PushToken, platform: PushPlatform?) {
    self.init(token: token, platform: platform, lastSentAt: nil, dueAt: nil)
  }
}

/// One installation's push registration in a queue dump.
public struct PushRecord: Hashable, Sendable, Codable {
  /// The user and client id.
  public var installation: MutationSource
  /// The platform token.
  public var token: PushToken
  /// The platform that issued it, when known (absent in dumps written before platforms).
  public var platform: PushPlatform?

  /// Creates a PushRecord from its parts.
  public init(installation: MutationSource, token: PushToken, platform: PushPlatform? = nil) {
    self.installation = installation
    self.token = token
    self.platform = platform
  }
}

/// A push the server wants sent: to which token, for which installation, with which payload (JSON of a
/// `PushPayload`, at most ``EventServerConfiguration/maximumPushPayloadBytes`` bytes).
public struct PushNotification: Sendable, Hashable {
  /// The platform token.
  public var token: PushToken
  /// The platform that issued the token, when the installation said: which sender delivers it.
  public var platform: PushPlatform?
  /// The installation it is for.
  public var installation: MutationSource
  /// The payload's JSON.
  public var payload: [UInt8]

  /// Creates a PushNotification from its parts.
  public init(token: PushToken, platform: PushPlatform? = nil, installation: MutationSource, payload: [UInt8]) {
    self.token = token
    self.platform = platform
    self.installation = installation
    self.payload = payload
  }
}
