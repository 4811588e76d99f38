import EventProtocol

/// One input of ``EventServerStateMachine`` that changes durable state, as the input log stores it.
///
/// The server's durable form is a ``ServerSnapshot`` plus the inputs recorded since it: replaying them
/// through ``EventServerStateMachine/replay(_:)`` rebuilds the same application state, the same queues with
/// the same event ids, the same mutation memory and the same push tokens. Whatever the live server decided
/// from state that is not durable (parked polls, random draws) is recorded as the decision itself: the
/// queue id a registration chose, the queues an expiry or an eviction removed, the queues a heartbeat went
/// to. Everything else (a command's events, a mutation's verdict, a queue dropped for overflow) follows from
/// durable state and is recomputed.
///
/// Poll acknowledgements are recorded too, lazily and in batches (``acknowledgements(_:)``): a poll writes
/// nothing, and losing acknowledgements in a crash only redelivers events the client skips by id.
public enum ServerInput<Command: Codable & Sendable>: Sendable, Codable {
  /// A user registered: the queue was created with the id the server drew, after removing `evicted`
  /// (the user's expired queues and least recently used ones over the limit).
  case registered(
    user: UserID,
    queueID: QueueID,
    eventTypes: Set<String>?,
    idleTimeout: Duration,
    clientID: ClientID?,
    evicted: [QueueID]
  )
  /// A client's outbox sent a mutation; its verdict (applied, repeat, rejected) is recomputed on replay.
  case mutationReceived(
    user: UserID,
    clientID: ClientID,
    mutationID: MutationID,
    digest: MutationDigest,
    command: Command
  )
  /// A user sent a command outside the outbox, and the application accepted it.
  case commandHandled(user: UserID, command: Command)
  /// A poll arrived on the queue, acknowledging everything through `lastEventID`; `nil` when only its
  /// contact time changed (a parked poll's caller went away). Written by servers before acknowledgements
  /// were batched; replayed as then.
  case acknowledged(queueID: QueueID, lastEventID: Int?)
  /// Polls acknowledged these queues since the last record: each is pruned through its `lastEventID` and
  /// its contact time moves to its `contact` (never back). Recorded before the next input of any kind, or
  /// when ``EventServerConfiguration/acknowledgementFlushInterval`` passed, or at shutdown.
  case acknowledgements([QueueAcknowledgement])
  /// Parked polls on these queues reached their heartbeat deadline: each queue got a heartbeat event.
  case heartbeatsSent(queueIDs: [QueueID])
  /// These queues were removed for reasons that depend on what is not durable (expired while no poll was
  /// parked, deleted by their user, refused as not intact after a restart).
  case queuesRemoved(queueIDs: [QueueID])
  /// The periodic sweep ran: `expired` queues were removed and old mutation memory forgotten.
  case swept(expired: [QueueID])
  /// An installation registered its push token (`platform` absent in logs written before platforms).
  case pushTokenRegistered(token: PushToken, user: UserID, clientID: ClientID, platform: PushPlatform?)
  /// The push platform reported a token invalid.
  case pushTokenInvalidated(token: PushToken)
  /// The application's own deadline came (``ServerApplication/deadlineReached(at:)``); what it did
  /// follows from its durable state and the entry's time, and is recomputed on replay.
  case applicationDeadlineReached
  /// A stored application's deadline work, decided in its database transaction
  /// (``StoredApplication/deadlineReached(at:in:)``): `command` carries the events it delivered, which the
  /// application (a ``StoredRelay``) hands back on replay.
  case deadlineDecided(command: Command)
  /// The server started again from durable state: every queue's event ids jump `idSkip` ahead (a random
  /// distance drawn at that recovery, so a lost incarnation that started from the same state almost surely
  /// handed out other ids), and each queue that accepts `restart` events gets one. `idSkip` is absent in logs
  /// written before it: those recoveries skipped to the wall clock's microseconds, as they did then.
  case recovered(idSkip: Int?)
}

/// A recorded input with the server's time when it happened.
public struct ServerLogEntry<Command: Codable & Sendable>: Sendable, Codable {
  /// The server's time when the input happened; replay passes it as `now`.
  public var time: Timestamp
  /// What happened.
  public var input: ServerInput<Command>

  /// Creates an entry.
  public init(time: Timestamp, input: ServerInput<Command>) {
    self.time = time
    self.input = input
  }
}
