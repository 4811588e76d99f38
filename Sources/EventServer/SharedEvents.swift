import EventProtocol

/// Who caused each stored event, and how many queues hold it: the part of the server's one copy of each
/// event that does not depend on the event type (the bodies are kept beside it by ``QueueTable``).
///
/// An event delivered to ten queues is stored once; each queue holds a reference to it (its own id for the
/// event and the entry's index), kept as runs of consecutive entries (``HeldRun``), so a delivery costs a
/// queue at most two integers, and a counter when the queue took the entry before too. An entry is freed
/// when the last queue holding it acknowledges it (or goes), and its index is reused, lowest first, so that
/// events stored one after another take consecutive entries: memory follows the events still pending
/// somewhere, not the oldest of them.
struct SharedEvents: Sendable, Equatable {
  /// One stored event's bookkeeping.
  struct Entry: Sendable, Equatable {
    /// How many queues hold the event.
    var holders: Int
    /// The user whose command caused it; `nil` for the application's own deadlines and the server's events.
    var author: UserID?
    /// The mutation that caused it, shown only in the author's own queues.
    var origin: MutationOrigin?
  }

  private(set) var entries: [Entry] = []
  private var free: [Int] = []

  /// How many events are stored (held by at least one queue, or just added).
  var count: Int { entries.count - free.count }

  /// Stores a new event's bookkeeping, held by no queue yet.
  /// - Returns: Its index.
  mutating func add(author: UserID?, origin: MutationOrigin?) -> Int {
    let entry = Entry(holders: 0, author: author, origin: origin)
    if let index = free.popLast() {
      entries[index] = entry
      return index
    }
    entries.append(entry)
    return entries.count - 1
  }

  /// One more queue, owned by `user`, holds event `index`.
  /// - Returns: Whether the event is another user's (it counts against its author).
  mutating func hold(_ index: Int, for user: UserID) -> Bool {
    entries[index].holders += 1
    guard let author = entries[index].author else { return false }
    return author != user
  }

  /// `count` more queues hold event `index`, counted by their caller against the author.
  mutating func hold(_ index: Int, count: Int) {
    entries[index].holders += count
  }

  /// Whether event `index` has the same author as the entry before it, so that a queue holding both may
  /// keep them in one run (``HeldRun``).
  func joinsPrevious(_ index: Int) -> Bool {
    index > 0 && entries[index - 1].author == entries[index].author
  }

  /// A queue owned by `user` let the events of `run` go; those no queue holds any more are appended to
  /// `freed` (their indexes must be passed to ``recycle(_:)`` once their bodies are dropped).
  /// - Returns: The events' author when it is another user's.
  mutating func release(_ run: HeldRun, freed: inout [Int], by user: UserID) -> UserID? {
    entries.withUnsafeMutableBufferPointer { entries in
      for index in Int(run.entry)..<run.endEntry {
        entries[index].holders -= 1
        if entries[index].holders == 0 { freed.append(index) }
      }
    }
    return foreignAuthor(of: Int(run.entry), for: user)
  }

  /// Whether no queue holds event `index`.
  func isUnheld(_ index: Int) -> Bool { entries[index].holders == 0 }

  /// Event `index`'s origin as the queue of `user` shows it: only the author's own queues carry it.
  func origin(of index: Int, for user: UserID) -> MutationOrigin? {
    let entry = entries[index]
    guard let origin = entry.origin, entry.author == user else { return nil }
    return origin
  }

  /// Event `index`'s author when it is not `user`.
  func foreignAuthor(of index: Int, for user: UserID) -> UserID? {
    entries[index].author.flatMap { $0 == user ? nil : $0 }
  }

  /// Makes freed index `index` available again.
  mutating func recycle(_ index: Int) {
    entries[index] = Entry(holders: 0)
    if free.count + 1 == entries.count {
      // Nothing stored: give the memory back.
      entries.removeAll()
      free.removeAll()
    } else {
      free.append(index)
    }
  }
}
