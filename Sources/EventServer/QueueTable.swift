import EventProtocol

/// Where the server core keeps its queues: in slots of an array, found by id or by user, with an index of
/// when each may expire.
///
/// A queue keeps its slot for life, so the hot paths (fan-out, polls) index an array and change the queue in
/// place instead of hashing its id and copying it out and back. The expiry index holds, for every live
/// queue, at least one entry no later than the queue can expire; a sweep looks only at entries that came
/// due, so it costs in proportion to what expires (and to queues touched since their entry was made), never
/// to the number of queues.
struct QueueTable<Event: EventPayload>: Sendable {
  /// The queues by slot; `nil` for a free slot.
  var slots: [EventQueue<Event>?] = []
  /// How many pending events each user's commands put in other users' queues, across every queue.
  private(set) var pendingByAuthor: [UserID: Int] = [:]
  private var freeSlots: [Int] = []
  private var slotByID: [QueueID: Int] = [:]
  private var slotsByUser: [UserID: UserSlots] = [:]
  private var expiries = DeadlineHeap<QueueID>()

  /// How many queues there are.
  var count: Int { slotByID.count }

  /// The slot of queue `id`, if it exists.
  func slot(of id: QueueID) -> Int? { slotByID[id] }

  /// The queue `id`, if it exists.
  subscript(id: QueueID) -> EventQueue<Event>? {
    slotByID[id].flatMap { slots[$0] }
  }

  /// Every queue, by id.
  /// - Complexity: O(*n*).
  var byID: [QueueID: EventQueue<Event>] {
    slotByID.mapValues { slots[$0]! }
  }

  /// The ids of every queue, sorted.
  var sortedIDs: [QueueID] { slotByID.keys.sorted() }

  /// The slots of `user`'s queues, oldest first.
  func slots(of user: UserID) -> UserSlots {
    slotsByUser[user] ?? UserSlots()
  }

  /// Adds a queue whose id is not in the table.
  /// - Returns: Its slot.
  mutating func insert(_ queue: EventQueue<Event>) -> Int {
    for event in queue.foreignEvents { pendingByAuthor[event.author, default: 0] += 1 }
    let slot: Int
    if let free = freeSlots.popLast() {
      slot = free
      slots[slot] = queue
    } else {
      slot = slots.endIndex
      slots.append(queue)
    }
    slotByID[queue.id] = slot
    slotsByUser[queue.user, default: UserSlots()].append(slot)
    expiries.push(queue.id, at: queue.lastContact.advanced(by: queue.idleTimeout))
    return slot
  }

  /// Removes the queue in `slot`.
  /// - Returns: The queue, and whether it was its user's last.
  /// Appends an event to the queue in `slot`, counting it against `author` when that is another user.
  mutating func append(_ body: EventBody<Event>, origin: MutationOrigin?, author: UserID?, to slot: Int) {
    if slots[slot]!.append(body, origin: origin, author: author), let author {
      pendingByAuthor[author, default: 0] += 1
    }
  }

  /// `body`'s answer from the queue in `slot`, read in place. A field read through `slots[slot]!` copies the
  /// whole queue first (every array in it retained, then released) in the server's unspecialised code; an
  /// exclusive access does not (W1 spent a twentieth of its time in such copies). `body` must not change
  /// the queue.
  mutating func reading<Result>(_ slot: Int, _ body: (inout EventQueue<Event>) -> Result) -> Result {
    body(&slots[slot]!)
  }

  /// Prunes the queue in `slot` through `lastEventID`, releasing its authors' counts.
  mutating func prune(slot: Int, through lastEventID: Int) {
    forget(slots[slot]!.prune(through: lastEventID))
  }

  private mutating func forget(_ events: some Sequence<EventQueue<Event>.ForeignEvent>) {
    for event in events {
      pendingByAuthor[event.author, default: 1] -= 1
      if pendingByAuthor[event.author] == 0 { pendingByAuthor[event.author] = nil }
    }
  }

  mutating func remove(slot: Int) -> (queue: EventQueue<Event>, wasUsersLast: Bool) {
    let queue = slots[slot]!
    forget(queue.foreignEvents)
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
      guard let slot = slotByID[id], let queue = slots[slot] else { continue }
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
