/// A min-heap of items ordered by time, then by the order they were pushed, so equal times come out in the
/// order they went in (and a seeded run stays deterministic).
///
/// The server keeps its heartbeat deadlines and queue expiries in one, and the simulation its scheduled
/// happenings: finding the earliest is O(1), adding or taking one O(log *n*).
///
/// ```swift
/// var heap = DeadlineHeap<String>()
/// heap.push("later", at: t0.advanced(by: .seconds(2)))
/// heap.push("sooner", at: t0.advanced(by: .seconds(1)))
/// heap.pop()?.item   // "sooner"
/// ```
///
/// Its operations are `@inlinable`, so a module that uses it with its own item type gets a copy specialised
/// for that type: unspecialised, every move of an entry would go through the generic value witnesses and a
/// lookup of the type's metadata, which made up a third of the simulation's time.
public struct DeadlineHeap<Item> {
  @usableFromInline
  struct Entry {
    @usableFromInline var time: Timestamp
    @usableFromInline var sequence: UInt64
    @usableFromInline var item: Item

    @inlinable
    init(time: Timestamp, sequence: UInt64, item: Item) {
      self.time = time
      self.sequence = sequence
      self.item = item
    }
  }

  @usableFromInline var entries: [Entry] = []
  @usableFromInline var nextSequence: UInt64 = 0

  /// An empty heap.
  @inlinable
  public init() {}

  /// Whether the heap holds nothing.
  @inlinable
  public var isEmpty: Bool { entries.isEmpty }
  /// How many items the heap holds.
  @inlinable
  public var count: Int { entries.count }
  /// The earliest time held, if any.
  /// - Complexity: O(1).
  @inlinable
  public var nextTime: Timestamp? { entries.first?.time }
  /// The earliest item and its time, if any, without removing it.
  /// - Complexity: O(1).
  @inlinable
  public var first: (time: Timestamp, item: Item)? { entries.first.map { ($0.time, $0.item) } }

  /// Adds `item` at `time`, after any item already held at the same time.
  /// - Complexity: O(log *n*).
  @inlinable
  public mutating func push(_ item: Item, at time: Timestamp) {
    entries.append(Entry(time: time, sequence: nextSequence, item: item))
    nextSequence += 1
    entries.withUnsafeMutableBufferPointer { heap in
      var child = heap.count - 1
      while child > 0 {
        let parent = (child - 1) / 2
        guard Self.entry(child, isBefore: parent, in: heap) else { break }
        heap.swapAt(child, parent)
        child = parent
      }
    }
  }

  /// Removes and returns the earliest item and its time.
  /// - Complexity: O(log *n*).
  @inlinable
  @discardableResult
  public mutating func pop() -> (time: Timestamp, item: Item)? {
    guard !entries.isEmpty else { return nil }
    entries.swapAt(0, entries.count - 1)
    let top = entries.removeLast()
    entries.withUnsafeMutableBufferPointer { heap in
      var parent = 0
      while true {
        let left = 2 * parent + 1
        let right = left + 1
        var smallest = parent
        if left < heap.count, Self.entry(left, isBefore: smallest, in: heap) { smallest = left }
        if right < heap.count, Self.entry(right, isBefore: smallest, in: heap) { smallest = right }
        guard smallest != parent else { break }
        heap.swapAt(parent, smallest)
        parent = smallest
      }
    }
    return (top.time, top.item)
  }

  /// Whether entry `a` comes out before entry `b`: compared by their times and sequence numbers alone, read
  /// in place, so the items (the simulation's are references) are not copied, retained and released.
  @inlinable
  static func entry(_ a: Int, isBefore b: Int, in heap: UnsafeMutableBufferPointer<Entry>) -> Bool {
    let timeA = heap[a].time
    let timeB = heap[b].time
    return timeA < timeB || (timeA == timeB && heap[a].sequence < heap[b].sequence)
  }

  /// Removes and returns the earliest item when its time is at or before `now`.
  /// - Complexity: O(log *n*).
  @inlinable
  public mutating func pop(dueAt now: Timestamp) -> (time: Timestamp, item: Item)? {
    guard let time = nextTime, time <= now else { return nil }
    return pop()
  }
}

extension DeadlineHeap: Sendable where Item: Sendable {}
extension DeadlineHeap.Entry: Sendable where Item: Sendable {}
