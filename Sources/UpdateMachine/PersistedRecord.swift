import EventProtocol
import Foundation

/// Everything an update machine persists, written in one atomic step: state, finger, timestamps and outbox,
/// in a versioned envelope.
///
/// When read back (``restore(from:for:)``), the parts fail separately: a state that no longer decodes
/// (an app update changed `State`) is migrated or dropped while the outbox is kept; an outbox that no
/// longer decodes is set aside with the file and reported with its number of writes; only a file whose
/// envelope is unreadable is set aside whole.
public struct PersistedRecord<State: Codable & Sendable & Equatable, Mutation: Codable & Sendable & Equatable>:
  Codable, Sendable, Equatable
{
  /// The format version this build writes; it also reads version 1 (which had no ``stateVersion``).
  public static var currentVersion: Int { 2 }

  /// The format version of this record.
  public var version: Int
  /// The installation's id, for the server's mutation memory.
  public var clientID: ClientID
  /// The reducer's ``UpdateReducer/stateVersion`` when the state was written.
  public var stateVersion: Int
  /// The confirmed app-level state.
  public var state: State
  /// The finger, when the machine had one (polling, poll-failed, idle or stopped); `nil` means stale.
  public var finger: EventFinger?
  /// When the finger's queue last answered (register or poll): for the "queue must have expired" check.
  public var lastContactAt: Timestamp?
  /// When the data was last known current.
  public var dataAsOf: Timestamp?
  /// The queue lifetime the finger's queue was registered with.
  public var queueLifetime: Duration
  /// The long-poll timeout the server recommended.
  public var longPollTimeout: Duration
  /// The outbox, oldest first.
  public var outbox: [OutboxEntry<Mutation>]
  /// Mutations the server refused, for the app to show.
  public var rejected: [RejectedMutation<Mutation>]
  /// The id the next mutation gets.
  public var nextMutationID: MutationID
  /// The app's device-local data (never synced: transfers, caches), saved in the same atomic write.
  public var deviceData: Data?

  /// Creates a PersistedRecord from its parts.
  public init(
    clientID: ClientID,
    stateVersion: Int = 1,
    state: State,
    finger: EventFinger?,
    lastContactAt: Timestamp?,
    dataAsOf: Timestamp?,
    queueLifetime: Duration,
    longPollTimeout: Duration,
    outbox: [OutboxEntry<Mutation>],
    rejected: [RejectedMutation<Mutation>],
    nextMutationID: MutationID,
    deviceData: Data? = nil
  ) {
    self.version = Self.currentVersion
    self.clientID = clientID
    self.stateVersion = stateVersion
    self.state = state
    self.finger = finger
    self.lastContactAt = lastContactAt
    self.dataAsOf = dataAsOf
    self.queueLifetime = queueLifetime
    self.longPollTimeout = longPollTimeout
    self.outbox = outbox
    self.rejected = rejected
    self.nextMutationID = nextMutationID
    self.deviceData = deviceData
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    self.version = try container.decode(Int.self, forKey: .version)
    self.clientID = try container.decode(ClientID.self, forKey: .clientID)
    self.stateVersion = try container.decodeIfPresent(Int.self, forKey: .stateVersion) ?? 1
    self.state = try container.decode(State.self, forKey: .state)
    self.finger = try container.decodeIfPresent(EventFinger.self, forKey: .finger)
    self.lastContactAt = try container.decodeIfPresent(Timestamp.self, forKey: .lastContactAt)
    self.dataAsOf = try container.decodeIfPresent(Timestamp.self, forKey: .dataAsOf)
    self.queueLifetime = try container.decode(Duration.self, forKey: .queueLifetime)
    self.longPollTimeout = try container.decode(Duration.self, forKey: .longPollTimeout)
    self.outbox = try container.decode([OutboxEntry<Mutation>].self, forKey: .outbox)
    self.rejected = try container.decode([RejectedMutation<Mutation>].self, forKey: .rejected)
    self.nextMutationID = try container.decode(MutationID.self, forKey: .nextMutationID)
    self.deviceData = try container.decodeIfPresent(Data.self, forKey: .deviceData)
  }
}

/// The bytes of an app's device-local data (see ``PersistedRecord/deviceData``).
public typealias DeviceData = Data

/// What reading a persisted record had to do, for the app to show or log: kept in the snapshot until the
/// machine stops.
public enum StoreRecovery: Hashable, Sendable, CustomStringConvertible {
  /// The state was written under an older ``UpdateReducer/stateVersion`` and migrated.
  case stateMigrated(fromVersion: Int)
  /// The state no longer decodes (an app update changed `State`): the machine started stale and
  /// re-registered; the outbox was kept.
  case stateDiscarded(reason: String)
  /// The file, or its outbox, could not be used: its bytes were moved to `location` (`nil` if even that
  /// failed), and `strandedWrites` writes in them (`nil`: unknown) will not be sent by this machine.
  case setAside(problem: PersistenceError, location: String?, strandedWrites: Int?)

  public var description: String {
    switch self {
    case .stateMigrated(let version): "state migrated from version \(version)"
    case .stateDiscarded(let reason): "cached state discarded: \(reason)"
    case .setAside(let problem, let location, let stranded):
      "\(problem); set aside at \(location ?? "nowhere (moving failed)"); "
        + "stranded writes: \(stranded.map(String.init) ?? "unknown")"
    }
  }
}
