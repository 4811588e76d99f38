import EventProtocol

/// Everything an update machine persists, written in one atomic step: state, finger, timestamps and outbox,
/// in a versioned envelope.
public struct PersistedRecord<State: Codable & Sendable & Equatable, Mutation: Codable & Sendable & Equatable>:
  Codable, Sendable, Equatable
{
  /// The format version this build writes and reads.
  public static var currentVersion: Int { 1 }

  /// The format version of this record.
  public var version: Int
  /// The installation's id, for the server's mutation memory.
  public var clientID: ClientID
  /// The confirmed app-level state.
  public var state: State
  /// The finger, when the machine had one (live, poll-failed or idle); `nil` means stale.
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

  /// Creates a PersistedRecord from its parts.
  public init(
    clientID: ClientID,
    state: State,
    finger: EventFinger?,
    lastContactAt: Timestamp?,
    dataAsOf: Timestamp?,
    queueLifetime: Duration,
    longPollTimeout: Duration,
    outbox: [OutboxEntry<Mutation>],
    rejected: [RejectedMutation<Mutation>],
    nextMutationID: MutationID
  ) {
    self.version = Self.currentVersion
    self.clientID = clientID
    self.state = state
    self.finger = finger
    self.lastContactAt = lastContactAt
    self.dataAsOf = dataAsOf
    self.queueLifetime = queueLifetime
    self.longPollTimeout = longPollTimeout
    self.outbox = outbox
    self.rejected = rejected
    self.nextMutationID = nextMutationID
  }
}
