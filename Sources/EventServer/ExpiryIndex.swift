import EventProtocol

/// When each queue may expire: a min-heap of queue slots by deadline, then by slot (so a seeded run stays
/// deterministic), each entry 16 bytes.
///
/// ``DeadlineHeap`` keeps exact `Timestamp`s (16 bytes each), which the simulation's scheduler needs: an
/// entry must come out at the very time it went in. Here a deadline is kept in whole nanoseconds, rounded
/// down: a queue's record keeps its last contact and idle timeout in nanoseconds already (``QueueRecord``),
/// so its deadline is exact, and a deadline from a parked poll's `now` comes out at most a nanosecond early,
/// when ``QueueStore/expired(at:)`` checks the queue itself and files it again.
///
/// An entry names a queue by its slot and a 32-bit tag of its id (``tag(of:)``), not by the 16-byte id: a
/// slot is reused once its queue is gone, and the tag tells the new queue from the entry's. An entry whose
/// tag does not match its slot's queue is dropped. Two ids with the same tag in one slot cost at most one
/// extra entry for the newer queue, looked at when it comes due like any other (the queue itself decides
/// whether it expired): never a wrong expiry.
struct ExpiryIndex: Sendable {
  /// A queue to look at, and when.
  struct Due: Equatable, Sendable {
    var slot: Int
    var tag: UInt32
  }

  private struct Entry: Sendable {
    var deadline: Int64
    var slot: UInt32
    var tag: UInt32

    func isBefore(_ other: Entry) -> Bool {
      deadline < other.deadline || (deadline == other.deadline && slot < other.slot)
    }
  }

  private var entries: [Entry] = []

  /// How many entries there are (at least one per live queue).
  var count: Int { entries.count }

  /// The tag an entry keeps of queue `id`: FNV-1a over its UTF-8 bytes, the same in every process (a
  /// Swift `hashValue` is seeded per process, and a seeded run must come out the same each time).
  static func tag(of id: QueueID) -> UInt32 {
    var hash: UInt32 = 2_166_136_261
    for byte in id.rawValue.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
    return hash
  }

  /// Files the queue in `slot` (tagged `tag`) to be looked at `deadline`.
  mutating func file(slot: Int, tag: UInt32, at deadline: Timestamp) {
    entries.append(Entry(deadline: deadline.nanosecondsSinceEpoch, slot: UInt32(slot), tag: tag))
    var child = entries.count - 1
    while child > 0, entries[child].isBefore(entries[(child - 1) / 2]) {
      entries.swapAt(child, (child - 1) / 2)
      child = (child - 1) / 2
    }
  }

  /// Takes the entry due earliest, when its deadline is at or before `now`.
  mutating func takeDue(at now: Timestamp) -> Due? {
    guard let first = entries.first, first.deadline <= now.nanosecondsSinceEpoch else { return nil }
    entries.swapAt(0, entries.count - 1)
    entries.removeLast()
    var parent = 0
    while true {
      let left = 2 * parent + 1
      var earliest = parent
      if left < entries.count, entries[left].isBefore(entries[earliest]) { earliest = left }
      if left + 1 < entries.count, entries[left + 1].isBefore(entries[earliest]) { earliest = left + 1 }
      if earliest == parent { break }
      entries.swapAt(parent, earliest)
      parent = earliest
    }
    return Due(slot: Int(first.slot), tag: first.tag)
  }
}
