import EventProtocol

/// A queue's events not yet acknowledged (or references to them), in increasing id order, where every
/// operation costs its own work.
///
/// Acknowledged events are dropped by moving a head index, not by shifting the rest: draining a backlog of
/// *n* events in polls of *k* costs O(*n*) in all, not O(*n*²/*k*). The dead prefix is compacted away once
/// it is as long as what is left, so it never holds more than the live events' worth of memory and the
/// compaction is paid for by the events it drops (amortised O(1) each).
struct EventBacklog<Element: IdentifiedByEventID>: Sendable {
  private var storage: [Element] = []
  /// The index in ``storage`` of the first event not yet acknowledged.
  private var head: Int {
    get { Int(headIndex) }
    set { headIndex = Int32(newValue) }
  }
  /// ``head`` in 32 bits (a backlog of 2³¹ events would take 32 GB), so a queue's slot, with the same
  /// user's next queue beside it, fits in 16 bytes.
  private var headIndex: Int32 = 0

  /// An empty backlog.
  init() {}

  /// A backlog of `events`, which must be in increasing id order.
  init(_ events: [Element]) {
    storage = events
  }

  /// How many events are held.
  /// - Complexity: O(1).
  var count: Int { storage.count - head }

  /// Whether no event is held.
  /// - Complexity: O(1).
  var isEmpty: Bool { head == storage.count }

  /// The events held, in a slice of the storage.
  /// - Complexity: O(1).
  var live: ArraySlice<Element> { storage[head...] }

  /// The events held, as an array.
  /// - Complexity: O(1) when nothing acknowledged is waiting to be compacted (the array is shared), else
  ///   O(*n*) in the events held.
  var array: [Element] { head == 0 ? storage : Array(storage[head...]) }

  /// The first `limit` events held (all of them when `limit` is `nil`; at least one when any is held).
  /// - Complexity: O(`limit`), or as ``array`` when `limit` is `nil` or not below ``count``.
  func prefix(_ limit: Int?) -> [Element] {
    guard let limit, limit < count else { return array }
    return Array(storage[head..<(head + max(limit, 1))])
  }

  /// Appends an event, whose id must be above every id held.
  /// - Complexity: Amortised O(1).
  mutating func append(_ event: Element) {
    storage.append(event)
  }

  /// Drops every event with an id up to `lastEventID`, handing each to `dropped` first.
  /// - Complexity: O(log *n*) to find them, plus amortised O(1) per event dropped.
  mutating func removeThrough(_ lastEventID: Int, dropped: (Element) -> Void = { _ in }) {
    var low = head
    var high = storage.count
    while low < high {
      let middle = (low + high) / 2
      if storage[middle].id <= lastEventID { low = middle + 1 } else { high = middle }
    }
    for index in head..<low { dropped(storage[index]) }
    head = low
    if head == storage.count {
      storage.removeAll(keepingCapacity: storage.count <= 1_024)
      head = 0
    } else if head * 2 >= storage.count {
      storage.removeSubrange(..<head)
      head = 0
    }
  }
}

/// What a backlog holds: something with an event id.
protocol IdentifiedByEventID: Sendable, Equatable {
  /// The event's id in its queue.
  var id: Int { get }
}

extension EventEnvelope: IdentifiedByEventID {}

extension EventBacklog: Equatable {
  /// Backlogs are equal when they hold the same events, however much each has yet to compact.
  static func == (lhs: EventBacklog, rhs: EventBacklog) -> Bool {
    lhs.live.elementsEqual(rhs.live)
  }
}
