import EventProtocol
import JSONCoding

/// The server core's queues (``QueueStore``) with the bodies of the events they hold: each event stored
/// once, however many queues hold it.
///
/// Only the bodies depend on the event type. The state machine calls the store directly for everything
/// else (``store``), so a delivery and an acknowledgement run on concrete types even when the server is not
/// specialised for the application; the methods here touch the bodies once per event stored, answered or
/// freed.
struct QueueTable<Event: EventPayload>: Sendable {
  /// The queues and the stored events' bookkeeping.
  var store = QueueStore()
  /// Each stored event's body with the payload's encoding when the size check made one, by entry (`nil`
  /// for a free entry). Held by reference: a poll's answer shares it (one reference count per event, in
  /// code whose layouts do not depend on the event type), and encoding the answer copies the kept encoding
  /// instead of encoding the payload again.
  private var contents: [EventContentStorage?] = []
  /// Whether a poll's answer is written through ``StoredEnvelope``, whose layout is the envelope's (checked
  /// once here): code not specialised for the event type then writes each envelope with no look-up of the
  /// type's layout (Bench W1: 30 M deliveries/s against 20 M through the envelope's generic witnesses).
  /// Otherwise, and when a test turns it off, through `EventEnvelope` itself: the same answers.
  var answersThroughStoredLayout = StoredEnvelope.hasEnvelopeLayout(Event.self)

  /// The queue `id` with its events, if it exists.
  /// - Complexity: O(*n*) in its events.
  subscript(id: QueueID) -> EventQueue<Event>? {
    store.slot(of: id).map { queue(in: $0) }
  }

  /// Every queue, by id.
  /// - Complexity: O(*n*) in the queues and their events.
  var byID: [QueueID: EventQueue<Event>] {
    store.slotsByID.mapValues { queue(in: $0) }
  }

  /// The queue in `slot` as a value, with its own copy of its events.
  private func queue(in slot: Int) -> EventQueue<Event> {
    EventQueue(
      record: store[slot: slot],
      parkedPoll: store[parkedPollOf: slot],
      events: events(slot, limit: nil),
      foreignEvents: store.foreignEvents(slot)
    )
  }

  /// Adds a queue whose id is not in the table, storing its events.
  /// - Returns: Its slot.
  mutating func insert(_ queue: EventQueue<Event>) -> Int {
    var held = HeldRuns()
    var foreign = queue.foreignEvents[...]
    for event in queue.events {
      // The author is what decides both the budget and where the origin shows: another user for a foreign
      // event, the queue's user for one carrying its origin.
      var author: UserID? = event.origin == nil ? nil : queue.user
      // A foreign record naming no held event (only a hand-made dump has one) is skipped, not let stop the
      // rest from matching.
      while let first = foreign.first, first.id < event.id { foreign.removeFirst() }
      if let first = foreign.first, first.id == event.id {
        author = first.author
        foreign.removeFirst()
      }
      let entry = add(event.body, author: author, origin: event.origin)
      _ = store.holdForInsert(entry, for: queue.user)
      held.append(id: event.id, entry: entry, joinsPrevious: store.joinsPrevious(entry))
    }
    return store.insert(queue.record, holding: held)
  }

  /// Stores an event's body, held by no queue yet: ``QueueStore/hold(_:in:)`` gives it to queues, and
  /// ``dropIfUnheld(_:)`` forgets it if none took it.
  /// - Parameters:
  ///   - author: The user whose command caused it (`nil` for the application's deadlines and the server's
  ///     own events): in other users' queues it counts against them.
  ///   - origin: The mutation that caused it, shown in `author`'s own queues only.
  ///   - encodedPayload: The payload's members as JSON, when they were encoded (to measure them).
  /// - Returns: Its entry.
  mutating func add(
    _ body: EventBody<Event>,
    author: UserID?,
    origin: MutationOrigin?,
    encodedPayload: EncodedMembers? = nil
  ) -> Int {
    let entry = store.addEntry(author: author, origin: origin)
    let content = EventContentStorage.of(body, encodedPayload: encodedPayload)
    if entry == contents.endIndex {
      contents.append(content)
    } else {
      contents[entry] = content
    }
    return entry
  }

  /// Forgets stored event `entry` if no queue took it (every queue it was for was full).
  mutating func dropIfUnheld(_ entry: Int) {
    if store.isUnheld(entry) { free([entry]) }
  }

  /// The first `limit` events of the queue in `slot` (all of them when `limit` is `nil`).
  /// - Complexity: O(`limit`).
  func events(_ slot: Int, limit: Int?) -> [EventEnvelope<Event>] {
    let user = store[slot: slot].user
    let held = store.held(slot)
    let total = limit.map { min(max($0, 1), store.eventCount(slot)) } ?? store.eventCount(slot)
    // Not through the initializer below when empty: for no elements it writes the count into the one empty
    // array every thread shares (ThreadSanitizer reports the write racing with other threads' reads).
    guard total > 0 else { return [] }
    let shared = store.shared
    // Written in place into the answer's storage: appending one by one ran the array's unspecialised code,
    // with its metadata lookups, per event (W3's poll of 100,000 events).
    return contents.withUnsafeBufferPointer { contents in
      [EventEnvelope<Event>](unsafeUninitializedCapacity: total) { answer, count in
        if answersThroughStoredLayout {
          answer.withMemoryRebound(to: StoredEnvelope.self) { answer in
            Self.forEachEvent(in: held, upTo: total) { position, id, entry in
              answer.initializeElement(
                at: position,
                to: StoredEnvelope(
                  id: id,
                  storage: contents[entry].unsafelyUnwrapped,
                  origin: shared.origin(of: entry, for: user)
                )
              )
            }
          }
        } else {
          Self.forEachEvent(in: held, upTo: total) { position, id, entry in
            answer.initializeElement(
              at: position,
              to: EventEnvelope(
                id: id,
                storage: contents[entry].unsafelyUnwrapped,
                origin: shared.origin(of: entry, for: user)
              )
            )
          }
        }
        count = total
      }
    }
  }

  /// Calls `body` with the answer position, queue id and store entry of each of the first `total` events
  /// that `held` stands for, in order.
  @inline(__always)
  private static func forEachEvent(
    in held: ArraySlice<HeldRun>,
    upTo total: Int,
    _ body: (_ position: Int, _ id: Int, _ entry: Int) -> Void
  ) {
    var position = 0
    for run in held where position < total {
      let taken = min(Int(run.count), total - position)
      for offset in 0..<taken { body(position + offset, run.id + offset, Int(run.entry) + offset) }
      position += taken
    }
  }

  /// Prunes the queue in `slot` through `lastEventID`, freeing the events no queue holds any more.
  mutating func prune(slot: Int, through lastEventID: Int) {
    free(store.prune(slot: slot, through: lastEventID))
  }

  /// Removes the queue in `slot`, freeing the events no other queue holds.
  /// - Returns: Its record, and whether it was its user's last.
  mutating func remove(slot: Int) -> (queue: QueueRecord, parkedPoll: ParkedLongPoll?, wasUsersLast: Bool) {
    let (queue, parkedPoll, wasUsersLast, freed) = store.remove(slot: slot)
    free(freed)
    return (queue, parkedPoll, wasUsersLast)
  }

  /// Drops the bodies of `entries`, which no queue holds, and makes the entries available again.
  private mutating func free(_ entries: [Int]) {
    guard !entries.isEmpty else { return }
    contents.withUnsafeMutableBufferPointer { contents in
      for entry in entries { contents[entry] = nil }
    }
    // Recycled highest first, so the store hands them out again lowest first: events stored one after
    // another then take consecutive entries, which queues hold as one run.
    for entry in entries.reversed() { store.recycle(entry) }
    if store.storedEventCount == 0 { contents.removeAll() }
  }
}
