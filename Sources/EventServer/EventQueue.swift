import EventProtocol

/// One client's event queue as a value: its bookkeeping and the events it has not acknowledged.
///
/// The server keeps each event once, however many queues hold it (`QueueStore`); a queue read from it
/// (``EventServerStateMachine/queue(_:)``, a dump) is this value, with its own copy of its events, so
/// nothing done to one queue's value reaches another's. In the store, acknowledging events costs only what
/// it drops (`EventBacklog`).
public struct EventQueue<Event: EventPayload>: Sendable, Equatable, Codable {
  /// Everything but the events (what the server keeps per queue).
  var record: QueueRecord
  /// The events, in increasing id order.
  private var backlog = EventBacklog<EventEnvelope<Event>>()
  /// The pending events another user's command put here, with their author, in id order: what
  /// ``EventServerStateMachine/pendingEvents(authoredBy:)`` counts.
  public private(set) var foreignEvents: [ForeignEvent] = []

  /// The queue's id.
  public var id: QueueID { record.id }
  /// The user who registered the queue and alone may poll it.
  public var user: UserID { record.user }
  /// The installation that registered it, when it said: push notifications for that installation name
  /// this queue.
  public var clientID: ClientID? { record.clientID }
  /// The event types the queue accepts; `nil` accepts all. Heartbeats bypass the filter.
  public var eventTypes: Set<String>? { record.eventTypes }
  /// How long the queue lives without contact.
  public var idleTimeout: Duration { record.idleTimeout }
  /// The id the next event will get.
  public var nextEventID: Int { record.nextEventID }
  /// The highest id pruned so far; `-1` when nothing has been pruned.
  public var prunedThrough: Int { record.prunedThrough }
  /// The events not yet acknowledged, in increasing id order.
  /// - Complexity: O(1) usually; O(*n*) right after a poll acknowledged less than half of what was held.
  public var events: [EventEnvelope<Event>] { backlog.array }
  /// The last time a request touched the queue (or a parked poll on it ended).
  public internal(set) var lastContact: Timestamp {
    get { record.lastContact }
    set { record.lastContact = newValue }
  }
  /// The poll waiting on this queue, if any. Not part of a dump: connections do not survive a restart.
  public internal(set) var parkedPoll: ParkedPoll? {
    didSet { record.hasParkedPoll = parkedPoll != nil }
  }
  /// Event ids this queue skipped when the server recovered from durable state: a lost incarnation of the
  /// server (one whose last records never became durable, or whose state an operator rolled back) may have
  /// handed them out with other events, so a poll acknowledging one of them proves the client saw events
  /// this queue does not have, and the queue is refused as not intact. Ranges at or below the pruned mark
  /// are forgotten; in increasing order.
  public var skippedIDs: [Range<Int>] { record.skippedIDs }

  /// A pending event another user's command queued (``ForeignQueuedEvent``).
  public typealias ForeignEvent = ForeignQueuedEvent
  /// A long-poll waiting for an event or for its heartbeat deadline (``ParkedLongPoll``).
  public typealias ParkedPoll = ParkedLongPoll

  init(id: QueueID, user: UserID, clientID: ClientID?, eventTypes: Set<String>?, idleTimeout: Duration, now: Timestamp)
  {
    record = QueueRecord(
      id: id,
      user: user,
      clientID: clientID,
      eventTypes: eventTypes,
      idleTimeout: idleTimeout,
      now: now
    )
  }

  /// A queue of `record` holding `events`, `foreignEvents` of them queued by other users' commands.
  init(
    record: QueueRecord,
    parkedPoll: ParkedPoll? = nil,
    events: [EventEnvelope<Event>],
    foreignEvents: [ForeignEvent]
  ) {
    self.record = record
    self.record.hasParkedPoll = parkedPoll != nil
    self.parkedPoll = parkedPoll
    self.backlog = EventBacklog(events)
    self.foreignEvents = foreignEvents
  }

  /// Whether the queue takes events of `type`.
  public func accepts(_ type: String) -> Bool {
    record.accepts(type)
  }

  /// Whether the queue has outlived its idle timeout at `now`. A queue with a parked poll never expires.
  public func isExpired(at now: Timestamp) -> Bool {
    record.isExpired(at: now)
  }

  /// The id of the last event the queue has assigned; `-1` before the first.
  public var lastEventID: Int { record.lastEventID }

  /// The first `limit` events not yet acknowledged (all of them when `limit` is `nil`).
  /// - Complexity: O(`limit`) (see ``events`` for all of them).
  public func events(limit: Int?) -> [EventEnvelope<Event>] {
    backlog.prefix(limit)
  }

  /// How many events are not yet acknowledged.
  /// - Complexity: O(1).
  public var eventCount: Int { backlog.count }

  private enum CodingKeys: String, CodingKey {
    case id
    case user
    case clientID
    case eventTypes
    case idleTimeout
    case nextEventID
    case prunedThrough
    case events
    case lastContact
    case skippedIDs
    case foreignEvents
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    self.record = QueueRecord(
      id: try container.decode(QueueID.self, forKey: .id),
      user: try container.decode(UserID.self, forKey: .user),
      clientID: try container.decodeIfPresent(ClientID.self, forKey: .clientID),
      eventTypes: try container.decodeIfPresent(Set<String>.self, forKey: .eventTypes),
      idleTimeout: try container.decode(Duration.self, forKey: .idleTimeout),
      nextEventID: try container.decode(Int.self, forKey: .nextEventID),
      prunedThrough: try container.decode(Int.self, forKey: .prunedThrough),
      lastContact: try container.decode(Timestamp.self, forKey: .lastContact),
      // Written since the durable server; dumps before it skipped no ids.
      skippedIDs: try container.decodeIfPresent([Range<Int>].self, forKey: .skippedIDs) ?? []
    )
    self.backlog = EventBacklog(try container.decode([EventEnvelope<Event>].self, forKey: .events))
    // Written since authors were counted; before, no event counted against its author.
    self.foreignEvents = try container.decodeIfPresent([ForeignEvent].self, forKey: .foreignEvents) ?? []
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(id, forKey: .id)
    try container.encode(user, forKey: .user)
    try container.encodeIfPresent(clientID, forKey: .clientID)
    try container.encodeIfPresent(eventTypes, forKey: .eventTypes)
    try container.encode(idleTimeout, forKey: .idleTimeout)
    try container.encode(nextEventID, forKey: .nextEventID)
    try container.encode(prunedThrough, forKey: .prunedThrough)
    try container.encode(backlog.array, forKey: .events)
    try container.encode(lastContact, forKey: .lastContact)
    if !skippedIDs.isEmpty { try container.encode(skippedIDs, forKey: .skippedIDs) }
    if !foreignEvents.isEmpty { try container.encode(foreignEvents, forKey: .foreignEvents) }
  }

  /// The most skipped ranges a queue may hold: each recovery adds one until a poll acknowledges past it.
  static var maximumSkippedRanges: Int { 64 }

  /// The largest event id a restored queue may have reached (2⁶²): no real queue gets near it, and ids up to
  /// it can never overflow.
  static var maximumEventID: Int { 1 << 62 }

  /// Checks the invariants a decoded queue must hold, so a tampered dump cannot load inconsistent state.
  func validatedAfterDecoding() -> String? {
    // Ids far from any real queue's (Int.min, Int.max) would overflow `lastEventID` or later appends.
    if nextEventID < 0 || nextEventID > Self.maximumEventID {
      return "queue \(id): next event id \(nextEventID) outside 0...\(Self.maximumEventID)"
    }
    if idleTimeout <= .zero || idleTimeout > .seconds(365 * 24 * 3600) {
      return "queue \(id): idle timeout \(idleTimeout) out of range"
    }
    if prunedThrough < -1 || prunedThrough > lastEventID {
      return "queue \(id): pruned mark \(prunedThrough) outside 0..<\(nextEventID)"
    }
    var skippedEnd = prunedThrough + 1
    for range in skippedIDs {
      guard range.lowerBound >= skippedEnd, !range.isEmpty, range.upperBound <= nextEventID else {
        return "queue \(id): skipped ids \(range) out of order"
      }
      skippedEnd = range.upperBound
    }
    if skippedIDs.count > Self.maximumSkippedRanges {
      return "queue \(id): \(skippedIDs.count) skipped ranges, over \(Self.maximumSkippedRanges)"
    }
    var previousForeign = prunedThrough
    for event in foreignEvents {
      guard event.id > previousForeign, event.id < nextEventID else {
        return "queue \(id): foreign event id \(event.id) out of order"
      }
      previousForeign = event.id
    }
    var previous = prunedThrough
    for event in backlog.live {
      guard event.id > previous, event.id < nextEventID else {
        return "queue \(id): event id \(event.id) out of order"
      }
      previous = event.id
    }
    return nil
  }
}

/// The shell's id for a poll request, so the state machine can complete it without holding a continuation.
public struct PollID: Hashable, Sendable, Comparable, CustomStringConvertible {
  /// The number the shell gave the poll.
  public var rawValue: UInt64

  /// The poll id `rawValue`.
  public init(_ rawValue: UInt64) {
    self.rawValue = rawValue
  }

  public static func < (lhs: PollID, rhs: PollID) -> Bool {
    lhs.rawValue < rhs.rawValue
  }

  public var description: String { "poll#\(rawValue)" }
}

// Outside the generic queue: a type nested in a generic type is generic itself, so each use in the server's
// unspecialised code looked its metadata up at run time (W1: 553 k → 590 k deliveries/s once out).

/// A pending event another user's command queued.
public struct ForeignQueuedEvent: Sendable, Hashable, Codable {
  /// The event's id.
  public var id: Int
  /// The user whose command queued it.
  public var author: UserID
}

/// A long-poll waiting for an event or for its heartbeat deadline.
public struct ParkedLongPoll: Sendable, Hashable {
  /// The shell's id for the waiting request.
  public var pollID: PollID
  /// When a heartbeat ends the poll if no event came first.
  public var heartbeatAt: Timestamp
  /// The most events its answer may carry; `nil` for all.
  public var limit: Int?
}
