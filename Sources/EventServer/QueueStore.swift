import EventProtocol

/// Where the server core keeps its queues, apart from the event bodies: records in slots of an array,
/// found by id or by user, with an index of when each may expire, and each stored event's bookkeeping.
///
/// A queue keeps its slot for life, so the hot paths (fan-out, polls) index an array and change the queue in
/// place instead of hashing its id and copying it out and back. The expiry index holds, for every live
/// queue, at least one entry no later than the queue can expire; a sweep looks only at entries that came
/// due, so it costs in proportion to what expires (and to queues touched since their entry was made), never
/// to the number of queues.
///
/// Not generic, on purpose: the server core is generic over the application, and the servers and apps that
/// use it call it from another module, where it is not specialised. Every call into a method of a generic
/// type there looks the type's metadata up at run time (a hash-table lookup); a delivery or an
/// acknowledgement that touches only this store makes none. ``QueueTable`` adds the bodies.
struct QueueStore: Sendable {
  /// The queues by slot; `nil` for a free slot.
  private var slots: [StoredQueue?] = []
  /// How many pending events each user's commands put in other users' queues, across every queue.
  private(set) var pendingByAuthor: [UserID: Int] = [:]
  private var freeSlots: [Int] = []
  /// The slot of each queue, by its id (read from the slot's record).
  private var idIndex = SlotIndex()
  /// The slot of each user's oldest queue, by user; the others follow it through ``StoredQueue/nextOfUser``.
  private var userIndex = SlotIndex()
  private var expiries = ExpiryIndex()
  /// Each stored event's bookkeeping, by entry.
  private(set) var shared = SharedEvents()
  /// The poll parked on each queue that has one, by slot.
  private var parkedPolls: [Int: ParkedLongPoll] = [:]
  /// The mark of the delivery running (``beginDelivery()``).
  private var deliveryMark: UInt32 = 0
  /// Large recipient lists already resolved to slots (``slots(reaching:)``).
  private var audiences = AudienceCache()
  /// The array ``slots(reaching:)`` builds its answer in, kept for its capacity.
  private var reached: [Int] = []

  /// How many queues there are.
  var count: Int { idIndex.count }

  /// How many entries the expiry index holds: one per live queue, and those of queues removed since that
  /// have not come due yet.
  var expiryEntryCount: Int { expiries.count }

  /// How many events are stored, each once however many queues hold it.
  var storedEventCount: Int { shared.count }

  /// The slot of queue `id`, if it exists.
  func slot(of id: QueueID) -> Int? {
    idIndex.find(hash: id.hashValue) { slots[$0]!.record.id == id }
  }

  /// The slot of `user`'s oldest queue, if they have one.
  private func firstSlot(of user: UserID) -> Int? {
    userIndex.find(hash: user.hashValue) { slots[$0]!.record.user == user }
  }

  /// Whether a queue is in `slot` (a queue removed during a step leaves its slot free).
  func isOccupied(_ slot: Int) -> Bool { slots[slot] != nil }

  /// The record of the queue in `slot`, read and changed in place.
  subscript(slot slot: Int) -> QueueRecord {
    _read { yield slots[slot]!.record }
    _modify { yield &slots[slot]!.record }
  }

  /// The poll parked on the queue in `slot`, if any.
  subscript(parkedPollOf slot: Int) -> ParkedLongPoll? {
    get { slots[slot]!.record.hasParkedPoll ? parkedPolls[slot] : nil }
    set {
      slots[slot]!.record.hasParkedPoll = newValue != nil
      parkedPolls[slot] = newValue
    }
  }

  /// The events the queue in `slot` holds, as runs of references.
  func held(_ slot: Int) -> ArraySlice<HeldRun> { slots[slot]!.held.live }

  /// Every queue's slot, by id.
  var slotsByID: [QueueID: Int] {
    var result: [QueueID: Int] = [:]
    for (slot, stored) in slots.enumerated() { if let stored { result[stored.record.id] = slot } }
    return result
  }

  /// The ids of every queue, sorted.
  var sortedIDs: [QueueID] { slots.compactMap { $0?.record.id }.sorted() }

  /// Starts marking the queues one delivery reaches (``claimRecipient(_:)``): the marks of an earlier
  /// delivery no longer count.
  mutating func beginDelivery() {
    deliveryMark &+= 1
    if deliveryMark == 0 {
      // Wrapped after 2^32 deliveries: clear every mark, so an old one cannot pass for the new.
      for slot in slots.indices where slots[slot] != nil { slots[slot]!.deliveryMark = 0 }
      deliveryMark = 1
    }
  }

  /// The slots of every queue of `recipients`' distinct users, in recipient order (each user's oldest
  /// first). A large list the application passes again unchanged is resolved once (``AudienceCache``).
  ///
  /// The list is built in an array the store keeps for the purpose, so a delivery allocates nothing once the
  /// store has seen its size; hold the result only while delivering.
  mutating func slots(reaching recipients: [UserID]) -> [Int] {
    if let known = audiences.slots(for: recipients) { return known }
    beginDelivery()
    reached.removeAll(keepingCapacity: true)
    for recipient in recipients {
      for slot in claimRecipient(recipient) { reached.append(slot) }
    }
    audiences.keep(reached, for: recipients)
    return reached
  }

  /// The slots of `user`'s queues, oldest first, each marked as reached by the current delivery; empty when
  /// the user has no queue or this delivery reached the user already (a recipient named twice).
  ///
  /// A delivery to a thousand users finds each user's queues through one hash of the user id, and tells a
  /// repeated recipient apart by a mark on its first queue, not by hashing every recipient into a set.
  mutating func claimRecipient(_ user: UserID) -> UserSlots {
    var result = UserSlots()
    var next = firstSlot(of: user)
    while let slot = next {
      // Every queue of a user reached is marked: a queue removed while the delivery runs (over its
      // limit) cannot make the user's next queue look unreached.
      guard slots[slot]!.deliveryMark != deliveryMark else { break }
      slots[slot]!.deliveryMark = deliveryMark
      result.append(slot)
      next = slots[slot]!.nextOfUser
    }
    return result
  }

  /// The slots of `user`'s queues, oldest first.
  func slots(of user: UserID) -> UserSlots {
    var result = UserSlots()
    var next = firstSlot(of: user)
    while let slot = next {
      result.append(slot)
      next = slots[slot]!.nextOfUser
    }
    return result
  }

  /// How many events the queue in `slot` holds.
  func eventCount(_ slot: Int) -> Int { slots[slot]!.held.count }

  /// The pending events of the queue in `slot` that other users' commands put there.
  func foreignEvents(_ slot: Int) -> [ForeignQueuedEvent] {
    let user = slots[slot]!.record.user
    var result: [ForeignQueuedEvent] = []
    for run in slots[slot]!.held.live {
      guard let author = shared.foreignAuthor(of: Int(run.entry), for: user) else { continue }
      for id in run.id..<run.endID { result.append(ForeignQueuedEvent(id: id, author: author)) }
    }
    return result
  }

  /// Adds a queue whose id is not in the store, holding `held` (entries already added, and each counted as
  /// held by it with ``holdForInsert(_:for:)``).
  /// - Returns: Its slot.
  mutating func insert(_ record: QueueRecord, holding held: HeldRuns) -> Int {
    let slot: Int
    var record = record
    record.hasParkedPoll = false
    let stored = StoredQueue(record: record, held: held)
    if let free = freeSlots.popLast() {
      slot = free
      slots[slot] = stored
    } else {
      slot = slots.endIndex
      slots.append(stored)
    }
    idIndex.insert(slot: slot, hash: record.id.hashValue)
    audiences.removeAll()
    if var last = firstSlot(of: record.user) {
      while let next = slots[last]!.nextOfUser { last = next }
      slots[last]!.nextOfUser = slot
    } else {
      userIndex.insert(slot: slot, hash: record.user.hashValue)
    }
    expiries.file(
      slot: slot,
      tag: ExpiryIndex.tag(of: record.id),
      at: record.lastContact.advanced(by: record.idleTimeout)
    )
    return slot
  }

  /// Adds a stored event's bookkeeping, held by no queue yet. ``QueueTable`` keeps its body under the same
  /// index.
  mutating func addEntry(author: UserID?, origin: MutationOrigin?) -> Int {
    shared.add(author: author, origin: origin)
  }

  /// Counts stored event `entry` as held by a queue of `user` that is not in the store yet (a restored
  /// queue's events).
  /// - Returns: Whether it is another user's event; it is counted against its author.
  mutating func holdForInsert(_ entry: Int, for user: UserID) -> Bool {
    guard shared.hold(entry, for: user) else { return false }
    if let author = shared.entries[entry].author { pendingByAuthor[author, default: 0] += 1 }
    return true
  }

  /// Whether stored event `entry` may join a run that holds the entry before it (the same author): asked
  /// once per event, not once per queue.
  func joinsPrevious(_ entry: Int) -> Bool { shared.joinsPrevious(entry) }

  /// Appends stored event `entry` to the queue in `slot` with the queue's next id, without counting the
  /// queue among its holders: a delivery to many queues counts them all at once with
  /// ``settle(_:heldBy:author:)``.
  /// - Parameter joinsPrevious: ``joinsPrevious(_:)`` for `entry`.
  /// - Returns: Whether the queue took it (`false` when it already holds `limit` events).
  mutating func take(_ entry: Int, in slot: Int, limit: Int, joinsPrevious: Bool) -> Bool {
    // One access to the slot: the fan-out's hottest line.
    slots[slot]!.take(entry, limit: limit, joinsPrevious: joinsPrevious)
  }

  /// Counts the `holders` queues that took stored event `entry` (``take(_:in:limit:joinsPrevious:)``),
  /// and those of them not `author`'s against `author`'s budget.
  /// - Complexity: O(1) plus O(*k*) in `author`'s queues: no compare per queue reached.
  mutating func settle(_ entry: Int, heldBy holders: Int, author: UserID?) {
    guard holders > 0 else { return }
    shared.hold(entry, count: holders)
    guard let author else { return }
    // The author's queues that took the event hold it last.
    var own = 0
    var next = firstSlot(of: author)
    while let slot = next {
      if slots[slot]!.held.last?.endEntry == entry + 1 { own += 1 }
      next = slots[slot]!.nextOfUser
    }
    countPending(holders - own, by: author)
  }

  /// Counts `count` more pending events in other users' queues against `author`.
  mutating func countPending(_ count: Int, by author: UserID) {
    if count > 0 { pendingByAuthor[author, default: 0] += count }
  }

  /// Whether no queue holds stored event `entry`.
  func isUnheld(_ entry: Int) -> Bool { shared.isUnheld(entry) }

  /// Makes freed entry `entry` available again (its body already dropped).
  mutating func recycle(_ entry: Int) { shared.recycle(entry) }

  /// Prunes the queue in `slot` through `lastEventID`, releasing its authors' counts.
  /// - Returns: The entries no queue holds any more: their bodies are to be dropped, then ``recycle(_:)``.
  mutating func prune(slot: Int, through lastEventID: Int) -> [Int] {
    guard slots[slot]!.record.markPruned(through: lastEventID) else { return [] }
    var held = slots[slot]!.held
    slots[slot]!.held = HeldRuns()
    var released = ReleasedEvents(user: slots[slot]!.record.user)
    held.removeThrough(lastEventID) { released.add($0, in: &shared) }
    slots[slot]!.held = held
    return uncount(released)
  }

  private mutating func uncount(_ released: ReleasedEvents) -> [Int] {
    for (author, count) in released.authorRuns {
      pendingByAuthor[author, default: count] -= count
      if pendingByAuthor[author] == 0 { pendingByAuthor[author] = nil }
    }
    return released.freed
  }

  /// Removes the queue in `slot`, releasing its events.
  /// - Returns: Its record, its parked poll, whether it was its user's last, and the entries no queue holds
  ///   any more (as from ``prune(slot:through:)``).
  mutating func remove(
    slot: Int
  ) -> (queue: QueueRecord, parkedPoll: ParkedLongPoll?, wasUsersLast: Bool, freed: [Int]) {
    let stored = slots[slot]!
    var released = ReleasedEvents(user: stored.record.user)
    for run in stored.held.live { released.add(run, in: &shared) }
    let freed = uncount(released)
    let queue = stored.record
    idIndex.remove(slot: slot, hash: queue.id.hashValue)
    audiences.removeAll()
    var wasUsersLast = false
    let first = firstSlot(of: queue.user)!
    if first == slot {
      if let next = stored.nextOfUser {
        userIndex.replace(slot: slot, with: next, hash: queue.user.hashValue)
      } else {
        userIndex.remove(slot: slot, hash: queue.user.hashValue)
        wasUsersLast = true
      }
    } else {
      var previous = first
      while slots[previous]!.nextOfUser != slot { previous = slots[previous]!.nextOfUser! }
      slots[previous]!.nextOfUser = stored.nextOfUser
    }
    let parkedPoll = self[parkedPollOf: slot]
    if parkedPoll != nil { parkedPolls[slot] = nil }
    slots[slot] = nil
    freeSlots.append(slot)
    if idIndex.count == 0 {
      // Nothing left to index: drop the entries of queues removed before they expired.
      expiries = ExpiryIndex()
    }
    return (queue, parkedPoll, wasUsersLast, freed)
  }

  /// The slots of every queue expired at `now`, each once, in slot order. Entries of queues touched since
  /// are moved to the queue's new expiry; entries of removed queues are dropped.
  /// - Complexity: O(*k* log *n*) for the *k* entries that came due.
  mutating func expired(at now: Timestamp) -> [Int] {
    var expired: [Int] = []
    var stillLive: [(ExpiryIndex.Due, Timestamp)] = []
    while let due = expiries.takeDue(at: now) {
      // An entry of a queue gone since, whose slot is free or holds another queue, is dropped.
      guard due.slot < slots.count, let queue = slots[due.slot]?.record, ExpiryIndex.tag(of: queue.id) == due.tag
      else { continue }
      if queue.isExpired(at: now) {
        expired.append(due.slot)
      } else {
        // A parked poll keeps the queue alive; its idle time starts at the latest when the poll ends.
        let from = queue.hasParkedPoll ? now : queue.lastContact
        stillLive.append((due, from.advanced(by: queue.idleTimeout)))
      }
    }
    for (due, expiry) in stillLive { expiries.file(slot: due.slot, tag: due.tag, at: expiry) }
    // A queue may have two entries (see ``ExpiryIndex``): it is expired once.
    expired.sort()
    var kept = 0
    for slot in expired where kept == 0 || expired[kept - 1] != slot {
      expired[kept] = slot
      kept += 1
    }
    expired.removeLast(expired.count - kept)
    return expired
  }
}

// Outside the generic table: a type nested in a generic type is generic itself, and the server's
// unspecialised code would look its metadata up at run time on every delivery.

/// One queue as the table keeps it: its record and its references to the stored events.
struct StoredQueue: Sendable {
  var record: QueueRecord
  var held = HeldRuns()
  /// The slot of the same user's next queue (by age), if any.
  var nextOfUser: Int? {
    get { nextOfUserPlusOne == 0 ? nil : Int(nextOfUserPlusOne) - 1 }
    set { nextOfUserPlusOne = newValue.map { UInt32($0 + 1) } ?? 0 }
  }
  private var nextOfUserPlusOne: UInt32 = 0
  /// The last delivery that reached this queue (``QueueStore/claimRecipient(_:)``); it fits in the padding
  /// after `nextOfUserPlusOne`, so it costs a queue no memory.
  var deliveryMark: UInt32 = 0

  init(record: QueueRecord, held: HeldRuns) {
    self.record = record
    self.held = held
  }

  /// Appends stored event `entry` with the queue's next id, unless the queue holds `limit` events already.
  /// - Returns: Whether it took the event.
  mutating func take(_ entry: Int, limit: Int, joinsPrevious: Bool) -> Bool {
    guard held.count < limit else { return false }
    held.append(id: record.assignEventID(), entry: entry, joinsPrevious: joinsPrevious)
    return true
  }
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

  mutating func add(_ run: HeldRun, in shared: inout SharedEvents) {
    // Every event of a run has the same author: one compare for the run.
    let foreignAuthor = shared.release(run, freed: &freed, by: user)
    guard let foreignAuthor else { return }
    let count = Int(run.count)
    if let last = authorRuns.indices.last, authorRuns[last].author == foreignAuthor {
      authorRuns[last].count += count
    } else {
      authorRuns.append((foreignAuthor, count))
    }
  }
}
