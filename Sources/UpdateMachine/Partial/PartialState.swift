import EventProtocol

/// The part of an app's state held in part (seed 003's *partial update machine*): a partial function from
/// keys to items, and lists keyed by a `Narrow` with their ``IntervalSet`` of completeness.
///
/// It lives inside the app's `State` (at ``PartialUpdateReducer/partialState``), so it is persisted with the
/// rest of the record. The engine fills it from fetched pages; the reducer keeps it live from events with
/// ``upsert(_:)``, ``update(_:_:)`` and ``remove(_:)``.
///
/// - **Known** items (``item(_:)`` answers ``ItemKnowledge/known(_:)``) are complete and equal to the
///   server's item at the machine's finger. The machine's freshness says how old that finger is.
/// - A narrow's list is the known items that belong to it and lie in its complete intervals; outside
///   them, nothing is claimed.
/// - After a re-registration the known data becomes **stale**: still shown (``ListView/staleItems``),
///   no longer claimed complete or live, until the narrows are fetched again.
///
/// Memory is bounded: beyond ``narrowLimit`` narrows or ``itemLimit`` items, the least recently used
/// narrows are forgotten, with their intervals and the items no other narrow holds.
public struct PartialState<Item: PartialItem>: Codable, Sendable, Equatable {
  /// What is known of one narrow.
  struct NarrowRecord: Codable, Sendable, Equatable {
    var complete: IntervalSet
    var lastUsed: UInt64
  }

  /// The known items.
  public private(set) var known: [Item.Key: Item] = [:]
  /// The items from before the queue was lost, shown as stale.
  public private(set) var stale: [Item.Key: Item] = [:]
  var narrows: [Narrow: NarrowRecord] = [:]
  /// The narrows held before the queue was lost, with their last use, to show as stale and fetch again.
  var staleNarrows: [Narrow: UInt64] = [:]
  var useClock: UInt64 = 0
  /// The most narrows held at once.
  public var narrowLimit: Int
  /// The most known items held at once (the narrow in use keeps its items even past it).
  public var itemLimit: Int

  /// Creates an empty partial state: nothing known.
  public init(narrowLimit: Int = 50, itemLimit: Int = 5_000) {
    self.narrowLimit = narrowLimit
    self.itemLimit = itemLimit
  }

  // MARK: - What the app reads

  /// What is known of the item with `key`.
  public func item(_ key: Item.Key) -> ItemKnowledge<Item> {
    if let item = known[key] { return .known(item) }
    if let item = stale[key] { return .stale(item) }
    return .unknown
  }

  /// What is known of `narrow`'s list.
  public func list(_ narrow: Narrow) -> ListView<Item> {
    let complete = narrows[narrow]?.complete ?? IntervalSet()
    let items = known.values
      .filter { $0.belongs(to: narrow) && complete.contains($0.position) }
      .sorted { $0.position < $1.position }
    // Stale rows stay until a page covers them: inside a range fetched since they are known again, or gone.
    let staleItems = stale.values
      .filter { $0.belongs(to: narrow) && !complete.contains($0.position) }
      .sorted { $0.position < $1.position }
    return ListView(complete: complete, items: items, staleItems: staleItems)
  }

  /// Whether nothing is held: no item known or stale, no narrow.
  public var isEmpty: Bool { known.isEmpty && stale.isEmpty && narrows.isEmpty && staleNarrows.isEmpty }

  /// The narrows held, most recently used first.
  public var heldNarrows: [Narrow] {
    narrows.sorted { $0.value.lastUsed > $1.value.lastUsed }.map(\.key)
  }

  /// The narrows held before the queue was lost and not fetched again yet, most recently used first.
  public var staleNarrowList: [Narrow] {
    staleNarrows.sorted { $0.value > $1.value }.map(\.key)
  }

  // MARK: - What a reducer does with an event

  /// An event carries the whole of `item` (created, or changed in a way that may move it between
  /// narrows). The rule: an item is known exactly while a held list claims it.
  /// - It becomes (or stays) known if it lies in a complete interval of a held narrow it belongs to.
  /// - A known item that no held list claims any more (it moved out of every list the device holds) is
  ///   forgotten: ``item(_:)`` answers ``ItemKnowledge/unknown``, and a fetch of a narrow holding it brings
  ///   it back. Keeping it would keep an item nobody keeps up to date: no list's completeness covers its
  ///   later events.
  /// - A stale copy (from before the queue was lost) takes the new value and stays stale until a page
  ///   covers it.
  public mutating func upsert(_ item: Item) {
    if isClaimed(item) {
      known[item.key] = item
      stale[item.key] = nil
    } else {
      known[item.key] = nil
      if stale[item.key] != nil { stale[item.key] = item }
    }
  }

  /// An event changes part of the item with `key`: applied if it is known, ignored if not (a fetch will
  /// bring the whole item). A change that can move an item into a narrow must use ``upsert(_:)`` instead,
  /// with the whole item, or a list complete over its position would miss it.
  public mutating func update(_ key: Item.Key, _ change: (inout Item) -> Void) {
    guard var item = known[key] else { return }
    change(&item)
    known[key] = item
  }

  /// An event deletes the item with `key`: it is removed, known or stale.
  public mutating func remove(_ key: Item.Key) {
    known[key] = nil
    stale[key] = nil
  }

  /// Whether a held narrow's complete interval covers `item`.
  func isClaimed(_ item: Item) -> Bool {
    narrows.contains { narrow, record in record.complete.contains(item.position) && item.belongs(to: narrow) }
  }

  // MARK: - What the engine does

  /// Takes a page read at exactly the state's finger (no event since it was read): its items become known
  /// and its narrow complete over the page's range. The engine composes pages read at other event ids
  /// itself (``UpdateMachine/fetch(_:)``); this is for tests and tools that hold the finger still.
  public mutating func merge(_ answer: FetchAnswer<Item>) {
    merge(answer.page.items, over: answer.completeRange(position: \.position), of: answer.request.narrow)
  }

  /// Takes a page, already brought up to the machine's finger: `items` are the page's items as they are at
  /// the finger (those deleted since are gone), and the narrow's list is complete over `range`. Past the
  /// limits, the least recently used narrows go, never this one nor those in `shown`.
  mutating func merge(
    _ items: [Item],
    over range: ClosedRange<ListBound>,
    of narrow: Narrow,
    keeping shown: Set<Narrow> = []
  ) {
    useClock += 1
    narrows[narrow, default: NarrowRecord(complete: IntervalSet(), lastUsed: 0)].complete.insert(range)
    narrows[narrow]!.lastUsed = useClock
    for item in items {
      known[item.key] = item
      stale[item.key] = nil
    }
    // Stale items of this narrow inside the range are known now, or gone.
    for (key, item) in stale where item.belongs(to: narrow) && range.contains(.position(item.position)) {
      stale[key] = nil
    }
    staleNarrows[narrow] = nil
    evict(keeping: shown.union([narrow]))
  }

  /// Takes `limits` (when given) as this state's, then forgets the least recently used narrows past the
  /// limits, never those in `shown`.
  /// - Returns: Whether anything was forgotten.
  mutating func enforce(_ limits: PartialLimits?, keeping shown: Set<Narrow>) -> Bool {
    if let limits {
      narrowLimit = limits.narrows
      itemLimit = limits.items
    }
    let before = (known.count, narrows.count, stale.count, staleNarrows.count)
    evict(keeping: shown)
    return before != (known.count, narrows.count, stale.count, staleNarrows.count)
  }

  /// Marks `narrow` as just used, so it is the last to be forgotten.
  mutating func markUsed(_ narrow: Narrow) {
    useClock += 1
    narrows[narrow]?.lastUsed = useClock
  }

  /// The queue was lost: nothing is known any more. What was known is kept to show as stale, and the
  /// narrows held are returned, most recently used first, to be fetched again.
  mutating func retire() -> [Narrow] {
    let held = heldNarrows
    for (key, item) in known { stale[key] = item }
    known = [:]
    for (narrow, record) in narrows { staleNarrows[narrow] = max(staleNarrows[narrow] ?? 0, record.lastUsed) }
    narrows = [:]
    return held
  }

  /// Takes `retired`'s stale items and narrows, for those not known here.
  mutating func adoptStale(from retired: PartialState) {
    for (key, item) in retired.stale where known[key] == nil { stale[key] = item }
    for (narrow, used) in retired.staleNarrows where narrows[narrow] == nil { staleNarrows[narrow] = used }
    useClock = max(useClock, retired.useClock)
  }

  /// Forgets the least recently used narrows (never those in `keeping`) until within the limits, then the
  /// items no narrow holds.
  mutating func evict(keeping: Set<Narrow>) {
    while narrows.count > narrowLimit || (known.count > itemLimit && narrows.count > 1) {
      guard
        let oldest = narrows.filter({ !keeping.contains($0.key) })
          .min(by: { $0.value.lastUsed < $1.value.lastUsed })?.key
      else { break }
      narrows[oldest] = nil
      known = known.filter { isClaimed($0.value) }
    }
    while staleNarrows.count > narrowLimit, let oldest = staleNarrows.min(by: { $0.value < $1.value })?.key {
      staleNarrows[oldest] = nil
    }
    if stale.count > itemLimit {
      stale = stale.filter { _, item in staleNarrows.keys.contains { item.belongs(to: $0) } }
    }
  }
}
