import EventProtocol

/// An item of data the client holds only in part (a message, a video): it has a stable key, a position in
/// every list it is in, and a rule for which narrows it belongs to.
///
/// Positions order every list and must be unique; an item created later has a greater position than every
/// item before it (Zulip's message ids), so a list complete "to the very end" stays complete as new items
/// arrive by event.
///
/// ```swift
/// struct Message: PartialItem {
///   var id: Int
///   var channel: String
///   var text: String
///   var key: Int { id }
///   var position: Int { id }
///   func belongs(to narrow: Narrow) -> Bool { narrow.operand("channel").map { $0 == channel } ?? true }
/// }
/// ```
public protocol PartialItem: Codable, Sendable, Equatable {
  /// What identifies the item across versions.
  associatedtype Key: Hashable & Codable & Sendable

  /// The item's key.
  var key: Key { get }
  /// The item's place in every list it is in.
  var position: Int { get }
  /// Whether the item is in `narrow`'s list. It must depend only on the item and the narrow.
  func belongs(to narrow: Narrow) -> Bool
}

/// What the client knows of one item.
public enum ItemKnowledge<Item: PartialItem>: Equatable, Sendable {
  /// Complete, and up to date as of the machine's finger: every event about it since has been applied.
  case known(Item)
  /// Held from before the machine's queue was lost: shown as it was, no longer kept up to date, until a
  /// fetch makes it known again (or shows that it is gone).
  case stale(Item)
  /// Not held: fetch a page holding it.
  case unknown

  /// The item to show, known or stale.
  public var item: Item? {
    switch self {
    case .known(let item), .stale(let item): item
    case .unknown: nil
    }
  }
}

/// What the client knows of a narrow's list: the items held in order, and where the list is complete.
public struct ListView<Item: PartialItem>: Equatable, Sendable {
  /// The ranges of positions over which ``items`` is the whole list.
  public var complete: IntervalSet
  /// The known items of the narrow inside the complete ranges, in position order.
  public var items: [Item]
  /// Items shown from before the queue was lost, not yet fetched again, in position order: those outside
  /// the ranges fetched since (a page that lands replaces the stale rows it covers, and only those).
  public var staleItems: [Item]

  /// The items to show: the known ones and, outside the ranges known again, the stale ones, in position
  /// order. After a re-registration a user scrolled to older rows keeps seeing them (marked stale) while
  /// the newest page is fetched again.
  public var itemsToShow: [Item] {
    guard !staleItems.isEmpty else { return items }
    guard !items.isEmpty else { return staleItems }
    return (items + staleItems).sorted { $0.position < $1.position }
  }

  /// Whether the list is known to start at the very beginning.
  public var reachesOldest: Bool { complete.intervals.first?.lowerBound == .oldest }
  /// Whether the list is known to run to the very end (new items arrive as events).
  public var reachesNewest: Bool { complete.intervals.last?.upperBound == .newest }
}
