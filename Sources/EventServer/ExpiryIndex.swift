import EventProtocol

/// When each queue may expire: a min-heap of queue ids by deadline, then by the order they were filed (so a
/// seeded run stays deterministic), each entry 32 bytes.
///
/// ``DeadlineHeap`` keeps exact `Timestamp`s (16 bytes each), which the simulation's scheduler needs: an
/// entry must come out at the very time it went in. Here a deadline is kept in whole nanoseconds, rounded
/// down: a queue's record keeps its last contact and idle timeout in nanoseconds already (``QueueRecord``),
/// so its deadline is exact, and a deadline from a parked poll's `now` comes out at most a nanosecond early,
/// when ``QueueStore/expired(at:)`` checks the queue itself and files it again.
struct ExpiryIndex: Sendable {
  private struct Entry: Sendable {
    var deadline: Int64
    var sequence: UInt64
    var queueID: QueueID

    func isBefore(_ other: Entry) -> Bool {
      deadline < other.deadline || (deadline == other.deadline && sequence < other.sequence)
    }
  }

  private var entries: [Entry] = []
  private var nextSequence: UInt64 = 0

  /// Files `queueID` to be looked at `deadline`.
  mutating func file(_ queueID: QueueID, at deadline: Timestamp) {
    entries.append(Entry(deadline: deadline.nanosecondsSinceEpoch, sequence: nextSequence, queueID: queueID))
    nextSequence += 1
    var child = entries.count - 1
    while child > 0, entries[child].isBefore(entries[(child - 1) / 2]) {
      entries.swapAt(child, (child - 1) / 2)
      child = (child - 1) / 2
    }
  }

  /// Takes the queue filed earliest, when its deadline is at or before `now`.
  mutating func takeDue(at now: Timestamp) -> QueueID? {
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
    return first.queueID
  }
}
