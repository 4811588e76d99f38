import EventProtocol

/// Where the server core keeps its queues: records in slots of an array, found by id or by user, with an
/// index of when each may expire, and each event once, however many queues hold it.
///
/// A queue keeps its slot for life, so the hot paths (fan-out, polls) index an array and change the queue in
/// place instead of hashing its id and copying it out and back. The expiry index holds, for every live
/// queue, at least one entry no later than the queue can expire; a sweep looks only at entries that came
/// due, so it costs in proportion to what expires (and to queues touched since their entry was made), never
/// to the number of queues.
///
/// Only the event bodies depend on the event type; everything a delivery or an acknowledgement touches
/// (records, references, counts) is concrete (``QueueRecord``, ``SharedEvents``), so it runs without
/// run-time generic lookups even when the server is not specialised for the application.
struct QueueTable<Event: EventPayload>: Sendable {
  /// The queues by slot; `nil` for a free slot.
  private var slots: [StoredQueue?] = []
  /// How many pending events each user's commands put in other users' queues, across every queue.
  private(set) var pendingByAuthor: [UserID: Int] = [:]
  private var freeSlots: [Int] = []
  private var slotByID: [QueueID: Int] = [:]
  private var slotsByUser: [UserID: UserSlots] = [:]
  private var expiries = DeadlineHeap<QueueID>()
  /// Each stored event's bookkeeping, by entry.
  private var shared = SharedEvents()
  /// Each stored event's body, by entry (`nil` for a free entry).
  private var bodies: [EventBody<Event>?] = []

  /// How many queues there are.
  var count: Int { slotByID.count }

  /// How many events are stored, each once however many queues hold it.
  var storedEventCount: Int { shared.count }

  /// The slot of queue `id`, if it exists.
  func slot(of id: QueueID) -> Int? { slotByID[id] }

  /// Whether a queue is in `slot` (a queue removed during a step leaves its slot free).
  func isOccupied(_ slot: Int) -> Bool { slots[slot] != nil }

  /// The record of the queue in `slot`, read and changed in place.
  subscript(slot slot: Int) -> QueueRecord {
    _read { yield slots[slot]!.record }
    _modify { yield &slots[slot]!.record }
  }

  /// The queue `id` with its events, if it exists.
  /// - Complexity: O(*n*) in its events.
  subscript(id: QueueID) -> EventQueue<Event>? {
    slotByID[id].map { queue(in: $0) }
  }

  /// Every queue, by id.
  /// - Complexity: O(*n*) in the queues and their events.
  var byID: [QueueID: EventQueue<Event>] {
    slotByID.mapValues { queue(in: $0) }
  }

  /// The ids of every queue, sorted.
  var sortedIDs: [QueueID] { slotByID.keys.sorted() }

  /// The slots of `user`'s queues, oldest first.
  func slots(of user: UserID) -> UserSlots {
    slotsByUser[user] ?? UserSlots()
  }

  /// How many events the queue in `slot` holds.
  func eventCount(_ slot: Int) -> Int { slots[slot]!.held.count }

  /// The queue in `slot` as a value, with its own copy of its events.
  private func queue(in slot: Int) -> EventQueue<Event> {
    let stored = slots[slot]!
    let user = stored.record.user
    var foreign: [EventQueue<Event>.ForeignEvent] = []
    for held in stored.held.live {
      if let author = shared.foreignAuthor(of: held.entry, for: user) {
        foreign.append(ForeignQueuedEvent(id: held.id, author: author))
      }
    }
    return EventQueue(record: stored.record, events: events(slot, limit: nil), foreignEvents: foreign)
  }

  /// Adds a queue whose id is not in the table, storing its events.
  /// - Returns: Its slot.
  mutating func insert(_ queue: EventQueue<Event>) -> Int {
    var stored = StoredQueue(record: queue.record)
    var foreign = queue.foreignEvents[...]
    for event in queue.events {
      // The author is what decides both the budget and where the origin shows: another user for a foreign
      // event, the queue's user for one carrying its origin.
      var author: UserID? = event.origin == nil ? nil : queue.user
      if let first = foreign.first, first.id == event.id {
        author = first.author
        foreign.removeFirst()
      }
      let entry = add(event.body, author: author, origin: event.origin)
      if shared.hold(entry, for: queue.user), let author { pendingByAuthor[author, default: 0] += 1 }
      stored.held.append(HeldEvent(id: event.id, entry: entry))
    }
    let slot: Int
    if let free = freeSlots.popLast() {
      slot = free
      slots[slot] = stored
    } else {
      slot = slots.endIndex
      slots.append(stored)
    }
    slotByID[queue.id] = slot
    slotsByUser[queue.user, default: UserSlots()].append(slot)
    expiries.push(queue.id, at: queue.lastContact.advanced(by: queue.idleTimeout))
    return slot
  }

  /// Stores an event's body, held by no queue yet: ``hold(_:in:)`` gives it to queues, and
  /// ``dropIfUnheld(_:)`` forgets it if none took it.
  /// - Parameters:
  ///   - author: The user whose command caused it (`nil` for the application's deadlines and the server's
  ///     own events): in other users' queues it counts against them.
  ///   - origin: The mutation that caused it, shown in `author`'s own queues only.
  /// - Returns: Its entry.
  mutating func add(_ body: EventBody<Event>, author: UserID?, origin: MutationOrigin?) -> Int {
    let entry = shared.add(author: author, origin: origin)
    if entry == bodies.endIndex { bodies.append(body) } else { bodies[entry] = body }
    return entry
  }

  /// Appends stored event `entry` to the queue in `slot` with the queue's next id.
  /// - Returns: Whether another user's command caused it: the caller counts it against its author with
  ///   ``countPending(_:by:)``, once for all the queues it reached.
  mutating func hold(_ entry: Int, in slot: Int) -> Bool {
    let id = slots[slot]!.record.assignEventID()
    slots[slot]!.held.append(HeldEvent(id: id, entry: entry))
    return shared.hold(entry, for: slots[slot]!.record.user)
  }

  /// Counts `count` more pending events in other users' queues against `author`.
  mutating func countPending(_ count: Int, by author: UserID) {
    if count > 0 { pendingByAuthor[author, default: 0] += count }
  }

  /// Forgets stored event `entry` if no queue took it (every queue it was for was full).
  mutating func dropIfUnheld(_ entry: Int) {
    if shared.isUnheld(entry) { recycle(entry) }
  }

  /// The first `limit` events of the queue in `slot` (all of them when `limit` is `nil`).
  /// - Complexity: O(`limit`).
  func events(_ slot: Int, limit: Int?) -> [EventEnvelope<Event>] {
    let stored = slots[slot]!
    let user = stored.record.user
    let held = stored.held.live
    let taken = limit.map { held.prefix(max($0, 1)) } ?? held
    var events: [EventEnvelope<Event>] = []
    events.reserveCapacity(taken.count)
    for event in taken {
      events.append(
        EventEnvelope(id: event.id, body: bodies[event.entry]!, origin: shared.origin(of: event.entry, for: user))
      )
    }
    return events
  }

  /// Prunes the queue in `slot` through `lastEventID`, releasing the events no queue holds any more and
  /// their authors' counts.
  mutating func prune(slot: Int, through lastEventID: Int) {
    guard slots[slot]!.record.markPruned(through: lastEventID) else { return }
    var held = slots[slot]!.held
    slots[slot]!.held = EventBacklog()
    var released = ReleasedEvents(user: slots[slot]!.record.user)
    held.removeThrough(lastEventID) { released.add($0.entry, in: &shared) }
    slots[slot]!.held = held
    settle(released)
  }

  private mutating func settle(_ released: ReleasedEvents) {
    for (author, count) in released.authorRuns {
      pendingByAuthor[author, default: count] -= count
      if pendingByAuthor[author] == 0 { pendingByAuthor[author] = nil }
    }
    for entry in released.freed { recycle(entry) }
  }

  /// Frees entry `entry` and its body.
  private mutating func recycle(_ entry: Int) {
    bodies[entry] = nil
    shared.recycle(entry)
    if shared.count == 0 { bodies.removeAll() }
  }

  /// Removes the queue in `slot`, releasing its events.
  /// - Returns: Its record, and whether it was its user's last.
  mutating func remove(slot: Int) -> (queue: QueueRecord, wasUsersLast: Bool) {
    let stored = slots[slot]!
    var released = ReleasedEvents(user: stored.record.user)
    for held in stored.held.live { released.add(held.entry, in: &shared) }
    settle(released)
    let queue = stored.record
    slots[slot] = nil
    freeSlots.append(slot)
    slotByID[queue.id] = nil
    slotsByUser[queue.user]!.remove(slot)
    let wasUsersLast = slotsByUser[queue.user]!.isEmpty
    if wasUsersLast { slotsByUser[queue.user] = nil }
    if slotByID.isEmpty {
      // Nothing left to index: drop the entries of queues removed before they expired.
      expiries = DeadlineHeap()
    }
    return (queue, wasUsersLast)
  }

  /// The slots of every queue expired at `now`, in the order they came due. Entries of queues touched since
  /// are moved to the queue's new expiry; entries of removed queues are dropped.
  /// - Complexity: O(*k* log *n*) for the *k* entries that came due.
  mutating func expired(at now: Timestamp) -> [Int] {
    var expired: [Int] = []
    var stillLive: [(QueueID, Timestamp)] = []
    while let (_, id) = expiries.pop(dueAt: now) {
      guard let slot = slotByID[id], let queue = slots[slot]?.record else { continue }
      if queue.isExpired(at: now) {
        expired.append(slot)
      } else {
        // A parked poll keeps the queue alive; its idle time starts at the latest when the poll ends.
        let from = queue.parkedPoll == nil ? queue.lastContact : now
        stillLive.append((id, from.advanced(by: queue.idleTimeout)))
      }
    }
    for (id, expiry) in stillLive { expiries.push(id, at: expiry) }
    return expired
  }
}

// Outside the generic table: a type nested in a generic type is generic itself, and the server's
// unspecialised code would look its metadata up at run time on every delivery.

/// One queue as the table keeps it: its record and its references to the stored events.
struct StoredQueue: Sendable {
  var record: QueueRecord
  var held = EventBacklog<HeldEvent>()
}

/// The events a queue let go of, and the authors to uncount, run by run (a queue's events mostly come
/// from few authors, so a drain hashes an author once per run, not once per event).
struct ReleasedEvents {
  let user: UserID
  var freed: [Int] = []
  var authorRuns: [(author: UserID, count: Int)] = []

  init(user: UserID) {
    self.user = user
  }

  mutating func add(_ entry: Int, in shared: inout SharedEvents) {
    let (foreignAuthor, isFree) = shared.release(entry, by: user)
    if isFree { freed.append(entry) }
    guard let foreignAuthor else { return }
    if let last = authorRuns.indices.last, authorRuns[last].author == foreignAuthor {
      authorRuns[last].count += 1
    } else {
      authorRuns.append((foreignAuthor, 1))
    }
  }
}

/// The slots of one user's queues, oldest first; a user with one queue (the usual case) needs no array.
struct UserSlots: Sendable, Sequence {
  private var first: Int?
  private var rest: [Int] = []

  init() {}

  var isEmpty: Bool { first == nil }
  var count: Int { first == nil ? 0 : 1 + rest.count }

  mutating func append(_ slot: Int) {
    if first == nil { first = slot } else { rest.append(slot) }
  }

  mutating func remove(_ slot: Int) {
    if first == slot {
      first = rest.isEmpty ? nil : rest.removeFirst()
    } else {
      rest.removeAll { $0 == slot }
    }
  }

  func makeIterator() -> Iterator {
    Iterator(slots: self)
  }

  struct Iterator: IteratorProtocol {
    fileprivate let slots: UserSlots
    private var index = -1

    fileprivate init(slots: UserSlots) {
      self.slots = slots
    }

    mutating func next() -> Int? {
      defer { index += 1 }
      if index == -1 { return slots.first }
      return index < slots.rest.count ? slots.rest[index] : nil
    }
  }
}
