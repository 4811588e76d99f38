import EventProtocol

/// A queue's bookkeeping: everything about it but its events, and nothing that depends on the event type.
///
/// The server keeps its queues as records beside one shared store of events (``QueueStore``), so the hot
/// paths (a delivery, a poll's acknowledgement) run on concrete types. Code generic over the event type and
/// not specialised for it (a server library called with the app's types) looks up the metadata of every
/// generic type it touches at run time: that was over a third of the fan-out benchmark's time when the
/// queues themselves were generic. ``EventQueue`` is the public view: a record with its events.
struct QueueRecord: Sendable, Equatable {
  /// The queue's id.
  let id: QueueID
  /// The user who registered the queue and alone may poll it.
  let user: UserID
  /// The installation that registered it, when it said.
  let clientID: ClientID?
  /// The event types the queue accepts; `nil` accepts all. Heartbeats bypass the filter.
  let eventTypes: Set<String>?
  /// How long the queue lives without contact (kept to the nanosecond, at most 292 years).
  var idleTimeout: Duration { .nanoseconds(idleTimeoutNanoseconds) }
  private let idleTimeoutNanoseconds: Int64
  /// The id the next event will get.
  private(set) var nextEventID = 0
  /// The highest id pruned so far; `-1` when nothing has been pruned.
  private(set) var prunedThrough = -1
  /// The last time a request touched the queue (or a parked poll on it ended), to the nanosecond.
  var lastContact: Timestamp {
    get { CompactTime.timestamp(lastContactNanoseconds) }
    set { lastContactNanoseconds = CompactTime.nanoseconds(newValue) }
  }
  private var lastContactNanoseconds: Int64
  /// Whether a poll waits on this queue (``QueueStore`` keeps the poll itself: most queues have none).
  var hasParkedPoll = false
  /// Event ids skipped at a recovery (see ``EventQueue/skippedIDs``); in increasing order.
  private(set) var skippedIDs: [Range<Int>] = []

  init(id: QueueID, user: UserID, clientID: ClientID?, eventTypes: Set<String>?, idleTimeout: Duration, now: Timestamp)
  {
    self.id = id
    self.user = user
    self.clientID = clientID
    self.eventTypes = eventTypes
    self.idleTimeoutNanoseconds = CompactTime.nanoseconds(idleTimeout)
    self.lastContactNanoseconds = CompactTime.nanoseconds(now)
  }

  /// A record with its counters as decoded from a dump (checked afterwards by
  /// ``EventQueue/validatedAfterDecoding()``).
  init(
    id: QueueID,
    user: UserID,
    clientID: ClientID?,
    eventTypes: Set<String>?,
    idleTimeout: Duration,
    nextEventID: Int,
    prunedThrough: Int,
    lastContact: Timestamp,
    skippedIDs: [Range<Int>]
  ) {
    self.init(
      id: id,
      user: user,
      clientID: clientID,
      eventTypes: eventTypes,
      idleTimeout: idleTimeout,
      now: lastContact
    )
    self.nextEventID = nextEventID
    self.prunedThrough = prunedThrough
    self.skippedIDs = skippedIDs
  }

  /// Whether the queue takes events of `type`.
  func accepts(_ type: String) -> Bool {
    eventTypes?.contains(type) ?? true
  }

  /// Whether the queue has outlived its idle timeout at `now`. A queue with a parked poll never expires.
  func isExpired(at now: Timestamp) -> Bool {
    !hasParkedPoll && lastContact.duration(to: now) >= idleTimeout
  }

  /// The id of the last event the queue has assigned; `-1` before the first.
  var lastEventID: Int { nextEventID - 1 }

  /// Checks that a poll may acknowledge through `lastEventID`.
  func validateAcknowledgement(_ lastEventID: Int) throws(EventAPIError) {
    if lastEventID > self.lastEventID || lastEventID < -1 { throw .notInQueue(lastEventID: lastEventID) }
    if lastEventID < prunedThrough { throw .alreadyPruned(lastEventID: lastEventID) }
  }

  /// Whether acknowledging through `lastEventID` is consistent with this queue's history: `false` when
  /// the id is one the queue skipped at a recovery, or beyond its newest id while it still holds skipped ids
  /// (either way the client saw events of a lost incarnation).
  func isIntact(acknowledging lastEventID: Int) -> Bool {
    guard !skippedIDs.isEmpty else { return true }
    return lastEventID <= self.lastEventID && !skippedIDs.contains { $0.contains(lastEventID) }
  }

  /// Jumps the next event id to `nextID` (when it is ahead), remembering the ids skipped.
  mutating func skipIDs(upTo nextID: Int) {
    guard nextID > nextEventID else { return }
    skippedIDs.append(nextEventID..<nextID)
    nextEventID = nextID
  }

  /// Takes the next event id.
  mutating func assignEventID() -> Int {
    defer { nextEventID += 1 }
    return nextEventID
  }

  /// Marks every id up to `lastEventID` pruned.
  /// - Returns: `false` when they already were (nothing to drop).
  mutating func markPruned(through lastEventID: Int) -> Bool {
    guard lastEventID > prunedThrough else { return false }
    prunedThrough = lastEventID
    skippedIDs.removeAll { $0.upperBound - 1 <= lastEventID }
    return true
  }
}

/// Times as the queue records keep them: 64-bit nanoseconds instead of `Duration`'s 128-bit attoseconds, so a
/// hundred thousand idle queues each save 16 bytes. Beyond ±292 years a value saturates; a timestamp there is
/// kept as ``Timestamp/distantPast`` or ``Timestamp/distantFuture`` (``Timestamp/nanosecondsSinceEpoch``).
enum CompactTime {
  /// `duration` in nanoseconds (toward zero), saturating at `Int64`'s bounds.
  static func nanoseconds(_ duration: Duration) -> Int64 {
    Timestamp(sinceEpoch: duration).nanosecondsSinceEpoch
  }

  /// `timestamp` in nanoseconds since the epoch; `Int64.min` and `Int64.max` stand for the extremes.
  static func nanoseconds(_ timestamp: Timestamp) -> Int64 {
    timestamp.nanosecondsSinceEpoch
  }

  /// The timestamp `nanoseconds` after the epoch (the extremes for `Int64.min` and `Int64.max`).
  static func timestamp(_ nanoseconds: Int64) -> Timestamp {
    Timestamp(nanosecondsSinceEpoch: nanoseconds)
  }
}
