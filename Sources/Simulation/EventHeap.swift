import EventProtocol

/// A min-heap of scheduled items ordered by time, then by insertion order, so equal times keep the order
/// in which they were scheduled (the simulation stays deterministic).
struct EventHeap<Item> {
  /// The heap holds only times and sequence numbers; the items wait in `items`, so sifting moves small values.
  private var entries: [(time: Timestamp, sequence: UInt64)] = []
  private var items: [UInt64: Item] = [:]
  private var nextSequence: UInt64 = 0

  var isEmpty: Bool { entries.isEmpty }
  var count: Int { entries.count }
  var nextTime: Timestamp? { entries.first?.time }

  /// - Complexity: O(log *n*).
  mutating func push(_ item: Item, at time: Timestamp) {
    entries.append((time, nextSequence))
    items[nextSequence] = item
    nextSequence += 1
    var child = entries.count - 1
    while child > 0 {
      let parent = (child - 1) / 2
      guard Self.before(entries[child], entries[parent]) else { break }
      entries.swapAt(child, parent)
      child = parent
    }
  }

  /// - Complexity: O(log *n*).
  mutating func pop() -> (time: Timestamp, item: Item)? {
    guard !entries.isEmpty else { return nil }
    entries.swapAt(0, entries.count - 1)
    let top = entries.removeLast()
    var parent = 0
    while true {
      let left = 2 * parent + 1
      let right = left + 1
      var smallest = parent
      if left < entries.count, Self.before(entries[left], entries[smallest]) { smallest = left }
      if right < entries.count, Self.before(entries[right], entries[smallest]) { smallest = right }
      guard smallest != parent else { break }
      entries.swapAt(parent, smallest)
      parent = smallest
    }
    return (top.time, items.removeValue(forKey: top.sequence)!)
  }

  private static func before(
    _ lhs: (time: Timestamp, sequence: UInt64),
    _ rhs: (time: Timestamp, sequence: UInt64)
  ) -> Bool {
    (lhs.time, lhs.sequence) < (rhs.time, rhs.sequence)
  }
}
