/// Where a fetch starts: an item's position, or one end of the list.
///
/// On the wire: `"oldest"`, `"newest"`, or the position as an integer (Zulip's `anchor`).
public enum FetchAnchor: Hashable, Sendable, Codable, CustomStringConvertible {
  /// The first item of the list.
  case oldest
  /// The last item of the list.
  case newest
  /// The item at this position, or where it would be.
  case position(Int)

  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    if let position = try? container.decode(Int.self) {
      self = .position(position)
      return
    }
    switch try container.decode(String.self) {
    case "oldest": self = .oldest
    case "newest": self = .newest
    case let other:
      if let position = Int(other) {
        self = .position(position)
      } else {
        throw DecodingError.dataCorruptedError(
          in: container,
          debugDescription: "anchor must be \"oldest\", \"newest\" or a position, not \"\(other)\""
        )
      }
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    switch self {
    case .oldest: try container.encode("oldest")
    case .newest: try container.encode("newest")
    case .position(let position): try container.encode(position)
    }
  }

  public var description: String {
    switch self {
    case .oldest: "oldest"
    case .newest: "newest"
    case .position(let position): "\(position)"
    }
  }
}

/// A request for one page of a ``Narrow``: up to ``before`` items before the anchor, the anchor's item, and
/// up to ``after`` items after it, in position order (Zulip's `GET /messages` parameters).
///
/// ```swift
/// let latest = FetchRequest(narrow: withBob, anchor: .newest, before: 20, after: 0)
/// ```
public struct FetchRequest: Hashable, Sendable, Codable, CustomStringConvertible {
  /// The list to read.
  public var narrow: Narrow
  /// Where to start.
  public var anchor: FetchAnchor
  /// How many items before the anchor, at most.
  public var before: Int
  /// How many items after the anchor, at most.
  public var after: Int

  /// The most items one fetch may ask for in each direction.
  public static let maximumPageSize = 1_000

  /// Creates a FetchRequest from its parts.
  public init(narrow: Narrow, anchor: FetchAnchor, before: Int, after: Int) {
    self.narrow = narrow
    self.anchor = anchor
    self.before = before
    self.after = after
  }

  /// Why the request cannot be answered, or `nil` when it can.
  public var problem: String? {
    if before < 0 || after < 0 { return "num_before and num_after must not be negative" }
    if before > Self.maximumPageSize || after > Self.maximumPageSize {
      return "num_before and num_after must be at most \(Self.maximumPageSize)"
    }
    return nil
  }

  private enum CodingKeys: String, CodingKey {
    case narrow
    case anchor
    case before = "num_before"
    case after = "num_after"
  }

  public var description: String { "\(narrow) around \(anchor) (-\(before)/+\(after))" }
}

/// One page of a narrow as an application read it: the items in position order and whether the list's ends
/// were reached.
///
/// `select(_:request:)` builds it from an application's sorted list, so every application answers the
/// anchor and the counts the same way.
public struct FetchPage<Item: Codable & Sendable & Equatable>: Sendable, Equatable {
  /// The items, in increasing position.
  public var items: [Item]
  /// Whether the page starts at the list's first item.
  public var foundOldest: Bool
  /// Whether the page ends at the list's last item.
  public var foundNewest: Bool

  /// Creates a FetchPage from its parts.
  public init(items: [Item], foundOldest: Bool, foundNewest: Bool) {
    self.items = items
    self.foundOldest = foundOldest
    self.foundNewest = foundNewest
  }

  /// The page `request` selects from `list`, which holds the narrow's items in increasing position.
  /// - Parameters:
  ///   - list: The narrow's items, in increasing position.
  ///   - request: The anchor and the counts before and after it.
  ///   - position: Each item's position in the list.
  public static func select(
    _ list: [Item],
    request: FetchRequest,
    position: (Item) -> Int
  ) -> FetchPage {
    // The index of the first item at or after the anchor; items before it are "before" the anchor.
    let split: Int
    switch request.anchor {
    case .oldest: split = 0
    case .newest: split = list.count
    case .position(let anchor):
      var low = 0
      var high = list.count
      while low < high {
        let middle = (low + high) / 2
        if position(list[middle]) < anchor { low = middle + 1 } else { high = middle }
      }
      split = low
    }
    let first = max(0, split - request.before)
    var last = min(list.count, split + request.after)
    if case .position(let anchor) = request.anchor, split < list.count, position(list[split]) == anchor {
      // The anchor's own item is in the page besides the `after` items, as in Zulip.
      last = min(list.count, split + 1 + request.after)
    }
    return FetchPage(items: Array(list[first..<last]), foundOldest: first == 0, foundNewest: last == list.count)
  }
}

/// The answer to a fetch: a page atomic with the caller's queue, exactly as a registration's snapshot is.
///
/// ``lastEventID`` is the id of the last event in the queue at the instant the server read the page: the
/// page reflects every event up to it and none after it. The client composes the page with its event
/// stream from that id (see `docs/partial-state.md`). On the wire it is Zulip's `GET /messages` answer, with
/// the items under `items` and the queue's `queue_id` and `last_event_id` beside them.
public struct FetchAnswer<Item: Codable & Sendable & Equatable>: Sendable, Equatable, Codable {
  /// The queue the page is atomic with.
  public var queueID: QueueID
  /// The id of the queue's last event when the page was read; `-1` for none yet.
  public var lastEventID: Int
  /// The request answered.
  public var request: FetchRequest
  /// The page.
  public var page: FetchPage<Item>

  /// Creates a FetchAnswer from its parts.
  public init(queueID: QueueID, lastEventID: Int, request: FetchRequest, page: FetchPage<Item>) {
    self.queueID = queueID
    self.lastEventID = lastEventID
    self.request = request
    self.page = page
  }

  /// The range of positions over which the page is the whole list of the narrow, at ``lastEventID``.
  ///
  /// From the first item (or the very beginning, when the page found the oldest) to the last item (or the
  /// very end, when it found the newest), widened to the anchor on a side where the page asked for nothing.
  /// - Parameter position: Each item's position in the list.
  public func completeRange(position: (Item) -> Int) -> ClosedRange<ListBound> {
    let anchor: ListBound =
      switch request.anchor {
      case .oldest: .oldest
      case .newest: .newest
      case .position(let position): .position(position)
      }
    let lower: ListBound =
      if page.foundOldest {
        .oldest
      } else if let first = page.items.first.map(position) {
        Swift.min(.position(first), anchor)
      } else {
        anchor
      }
    let upper: ListBound =
      if page.foundNewest {
        .newest
      } else if let last = page.items.last.map(position) {
        Swift.max(.position(last), anchor)
      } else {
        anchor
      }
    return lower...Swift.max(lower, upper)
  }

  private enum CodingKeys: String, CodingKey {
    case result
    case message = "msg"
    case queueID = "queue_id"
    case lastEventID = "last_event_id"
    case narrow
    case anchor
    case before = "num_before"
    case after = "num_after"
    case items
    case foundOldest = "found_oldest"
    case foundNewest = "found_newest"
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    self.queueID = try container.decode(QueueID.self, forKey: .queueID)
    self.lastEventID = try container.decode(Int.self, forKey: .lastEventID)
    self.request = FetchRequest(
      narrow: try container.decode(Narrow.self, forKey: .narrow),
      anchor: try container.decode(FetchAnchor.self, forKey: .anchor),
      before: try container.decode(Int.self, forKey: .before),
      after: try container.decode(Int.self, forKey: .after)
    )
    self.page = FetchPage(
      items: try container.decode([Item].self, forKey: .items),
      foundOldest: try container.decode(Bool.self, forKey: .foundOldest),
      foundNewest: try container.decode(Bool.self, forKey: .foundNewest)
    )
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("success", forKey: .result)
    try container.encode("", forKey: .message)
    try container.encode(queueID, forKey: .queueID)
    try container.encode(lastEventID, forKey: .lastEventID)
    try container.encode(request.narrow, forKey: .narrow)
    try container.encode(request.anchor, forKey: .anchor)
    try container.encode(request.before, forKey: .before)
    try container.encode(request.after, forKey: .after)
    try container.encode(page.items, forKey: .items)
    try container.encode(page.foundOldest, forKey: .foundOldest)
    try container.encode(page.foundNewest, forKey: .foundNewest)
  }
}

/// A place in a list ordered by position, with the two special ends: before every item and after every
/// item (present and future).
public enum ListBound: Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
  /// The very beginning.
  case oldest
  /// An item's position.
  case position(Int)
  /// The very end: after every item, including those not yet created.
  case newest

  public static func < (lhs: ListBound, rhs: ListBound) -> Bool {
    switch (lhs, rhs) {
    case (.oldest, .oldest), (.newest, _), (_, .oldest): false
    case (.oldest, _), (_, .newest): true
    case (.position(let left), .position(let right)): left < right
    }
  }

  public var description: String {
    switch self {
    case .oldest: "oldest"
    case .newest: "newest"
    case .position(let position): "\(position)"
    }
  }
}
