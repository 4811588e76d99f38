import EventProtocol

/// Who caused each stored event, and how many queues hold it: the part of the server's one copy of each
/// event that does not depend on the event type (the bodies are kept beside it by ``QueueTable``).
///
/// An event delivered to ten queues is stored once; each queue holds a ``HeldEvent`` (its own id for the
/// event and the entry's index), so a delivery copies two integers instead of the event. An entry is freed
/// when the last queue holding it acknowledges it (or goes), and its index is reused: memory follows the
/// events still pending somewhere, not the oldest of them.
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

  /// A queue owned by `user` let event `index` go.
  /// - Returns: The event's author when it is another user's, and whether no queue holds it any more (its
  ///   index must then be passed to ``recycle(_:)`` once its body is dropped).
  mutating func release(_ index: Int, by user: UserID) -> (foreignAuthor: UserID?, isFree: Bool) {
    entries[index].holders -= 1
    return (foreignAuthor(of: index, for: user), entries[index].holders == 0)
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

/// A queue's reference to a stored event: its id in this queue and the event's index in ``SharedEvents``.
struct HeldEvent: IdentifiedByEventID {
  var id: Int
  var entry: Int
}
