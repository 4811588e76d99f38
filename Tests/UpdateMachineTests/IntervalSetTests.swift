import EventProtocol
import Foundation
import Testing

@testable import UpdateMachine

@Suite("Intervals of completeness")
struct IntervalSetTests {
  func p(_ position: Int) -> ListBound { .position(position) }

  @Test("overlapping and touching intervals merge; apart ones stay apart, sorted")
  func merging() {
    var set = IntervalSet()
    set.insert(p(10)...p(20))
    set.insert(p(30)...p(40))
    #expect(set.intervals == [p(10)...p(20), p(30)...p(40)])
    set.insert(p(21)...p(25))
    #expect(set.intervals == [p(10)...p(25), p(30)...p(40)], "21 touches 20: integer positions")
    set.insert(p(24)...p(31))
    #expect(set.intervals == [p(10)...p(40)])
    set.insert(p(1)...p(2))
    #expect(set.intervals == [p(1)...p(2), p(10)...p(40)])
    #expect(set.contains(2) && set.contains(40) && !set.contains(5) && !set.contains(41))
  }

  @Test("the special ends: the very beginning and the very end, which future positions fall in")
  func specialEnds() {
    var set = IntervalSet([p(5)...(.newest)])
    #expect(set.contains(1_000_000))
    #expect(!set.contains(4))
    set.insert(.oldest...p(4))
    #expect(set.intervals == [.oldest ... .newest])
    #expect(set.covers(.oldest...p(3)))
    let empty = IntervalSet([.newest ... .newest])
    #expect(!empty.contains(Int.max - 1))
  }

  @Test("removing splits an interval around the removed range, at integer positions")
  func splitting() {
    var set = IntervalSet([p(1)...p(10)])
    set.remove(p(5)...p(7))
    #expect(set.intervals == [p(1)...p(4), p(8)...p(10)])
    set.remove(p(1)...p(4))
    #expect(set.intervals == [p(8)...p(10)])
    var open = IntervalSet([.oldest ... .newest])
    open.remove(p(0)...p(0))
    #expect(open.intervals == [.oldest...p(-1), p(1) ... .newest])
    open.remove(p(1) ... .newest)
    #expect(open.intervals == [.oldest...p(-1)])
  }

  @Test("several intervals: a page apart from what is known adds a second interval, not a false claim")
  func severalIntervals() {
    var set = IntervalSet([p(100) ... .newest])
    set.insert(p(10)...p(20))
    #expect(set.intervals.count == 2)
    #expect(!set.covers(p(10)...p(100)))
    #expect(set.interval(containing: p(15)) == p(10)...p(20))
  }
}

@Suite("Fetch pages: anchor, counts and the range they prove")
struct FetchPageTests {
  struct Item: Codable, Sendable, Equatable {
    var position: Int
  }

  let list = [2, 4, 6, 8, 10].map(Item.init(position:))

  func page(_ anchor: FetchAnchor, _ before: Int, _ after: Int) -> FetchAnswer<Item> {
    let request = FetchRequest(narrow: Narrow([]), anchor: anchor, before: before, after: after)
    return FetchAnswer(
      queueID: "q",
      lastEventID: 0,
      request: request,
      page: FetchPage.select(list, request: request, position: \.position)
    )
  }

  @Test("an anchor on an item includes it besides the counts; the proven range runs item to item")
  func anchorOnItem() {
    let answer = page(.position(6), 1, 1)
    #expect(answer.page.items.map(\.position) == [4, 6, 8])
    #expect(!answer.page.foundOldest && !answer.page.foundNewest)
    #expect(answer.completeRange(position: \.position) == .position(4) ... .position(8))
  }

  @Test("an anchor between items; asking nothing before proves the range from the anchor")
  func anchorBetween() {
    let answer = page(.position(5), 0, 2)
    #expect(answer.page.items.map(\.position) == [6, 8])
    #expect(answer.completeRange(position: \.position) == .position(5) ... .position(8))
  }

  @Test("reaching an end claims the very beginning or the very end")
  func ends() {
    #expect(page(.newest, 2, 0).page.items.map(\.position) == [8, 10])
    #expect(page(.newest, 2, 0).completeRange(position: \.position) == .position(8) ... .newest)
    #expect(page(.oldest, 0, 10).completeRange(position: \.position) == .oldest ... .newest)
    #expect(page(.newest, 0, 0).completeRange(position: \.position) == .newest ... .newest)
  }

  @Test("the answer's wire form is Zulip's messages answer with the queue's last event id")
  func wire() throws {
    let answer = page(.position(6), 1, 1)
    let data = try WireFormat.encodeSuccess(answer)
    let text = String(decoding: data, as: UTF8.self)
    #expect(text.contains("\"found_oldest\":false") && text.contains("\"last_event_id\":0"))
    #expect(text.contains("\"anchor\":6") && text.contains("\"num_before\":1"))
    #expect(try WireFormat.decode(FetchAnswer<Item>.self, from: data) == answer)
  }
}

@Suite("Partial state: memory bound and persistence")
struct PartialStateTests {
  struct Note: PartialItem, Hashable {
    var id: Int
    var topic: String
    var key: Int { id }
    var position: Int { id }
    func belongs(to narrow: Narrow) -> Bool { narrow.terms.allSatisfy { $0.operand == topic } }
  }

  func page(
    _ topic: String,
    _ ids: ClosedRange<Int>,
    foundOldest: Bool = true,
    foundNewest: Bool = true
  ) -> FetchAnswer<Note> {
    // From the page's first item on (or the very beginning when it was found).
    let anchor: FetchAnchor = foundOldest ? .oldest : .position(ids.lowerBound)
    let request = FetchRequest(narrow: Narrow([NarrowTerm("topic", topic)]), anchor: anchor, before: 0, after: 100)
    return FetchAnswer(
      queueID: "q",
      lastEventID: 0,
      request: request,
      page: FetchPage(items: ids.map { Note(id: $0, topic: topic) }, foundOldest: foundOldest, foundNewest: foundNewest)
    )
  }

  /// After a re-registration a user scrolled to older rows keeps them: the newest page fetched again
  /// replaces the stale rows it covers, and only those (before, every stale row of the list vanished with
  /// the first page).
  @Test("stale rows stay on screen until a page that covers them lands")
  func staleRowsStayUntilCovered() {
    let a = Narrow([NarrowTerm("topic", "a")])
    var state = PartialState<Note>()
    state.merge(page("a", 1...100))
    _ = state.retire()
    // The newest page again: 61...100 (found newest, not oldest), 70 deleted meanwhile.
    state.merge(page("a", 61...100, foundOldest: false).withItems(Array(61...69) + Array(71...100), topic: "a"))
    let list = state.list(a)
    #expect(list.items.map(\.id) == Array(61...69) + Array(71...100))
    #expect(list.staleItems.map(\.id) == Array(1...60), "older rows outside the new page stay, stale")
    #expect(list.itemsToShow.map(\.id) == Array(1...69) + Array(71...100))
    // A page further back covers some of them: those become known, the rest stay stale.
    state.merge(page("a", 31...60, foundOldest: false, foundNewest: false))
    #expect(state.list(a).staleItems.map(\.id) == Array(1...30))
    #expect(state.list(a).itemsToShow.count == 99)
  }

  /// The reducer's contract: an item is known exactly while a held list claims it.
  @Test("an item that moves out of every held list is forgotten; moving into one makes it known; stale copies update")
  func itemsKnownWhileClaimed() {
    var state = PartialState<Note>()
    state.merge(page("a", 1...3))
    // Note 2 moves to topic b, which the device does not hold: nobody keeps it up to date any more.
    state.upsert(Note(id: 2, topic: "b"))
    #expect(state.item(2) == .unknown)
    #expect(state.list(Narrow([NarrowTerm("topic", "a")])).items.map(\.id) == [1, 3])
    // Once b is held, an item moving into its complete range is known.
    state.merge(page("b", 4...5))
    state.upsert(Note(id: 3, topic: "b"))
    #expect(state.item(3) == .known(Note(id: 3, topic: "b")))
    // After the queue is lost, a stale copy takes the new value (still stale: nothing claims it).
    _ = state.retire()
    state.upsert(Note(id: 1, topic: "c"))
    #expect(state.item(1) == .stale(Note(id: 1, topic: "c")))
  }

  @Test("past the narrow limit the least recently used narrow is forgotten, with the items only it held")
  func evictsLeastRecentlyUsed() {
    var state = PartialState<Note>(narrowLimit: 2, itemLimit: 100)
    state.merge(page("a", 1...3))
    state.merge(page("b", 4...5))
    state.markUsed(Narrow([NarrowTerm("topic", "a")]))
    state.merge(page("c", 6...6))
    #expect(Set(state.heldNarrows.map(\.description)) == ["topic:a", "topic:c"])
    #expect(state.item(4) == .unknown && state.item(1) == .known(Note(id: 1, topic: "a")))
    #expect(state.list(Narrow([NarrowTerm("topic", "b")])).complete.isEmpty)
  }

  @Test("past the item limit narrows go too, but never the one just used")
  func itemLimit() {
    var state = PartialState<Note>(narrowLimit: 10, itemLimit: 4)
    state.merge(page("a", 1...3))
    state.merge(page("b", 4...6))
    #expect(state.heldNarrows.map(\.description) == ["topic:b"])
    #expect(state.known.count == 3)
  }

  @Test("items, intervals, stale copies and use order survive encoding: the record keeps them")
  func persists() throws {
    var state = PartialState<Note>()
    state.merge(page("a", 1...3))
    state.merge(page("b", 4...5))
    _ = state.retire()
    state.merge(page("b", 4...4))
    let decoded = try JSONDecoder().decode(PartialState<Note>.self, from: JSONEncoder().encode(state))
    #expect(decoded == state)
    #expect(decoded.item(1) == .stale(Note(id: 1, topic: "a")))
    #expect(decoded.item(4) == .known(Note(id: 4, topic: "b")))
    #expect(decoded.item(5) == .unknown, "a refetched page without 5: gone from the stale copies too")
    #expect(decoded.staleNarrowList.map(\.description) == ["topic:a"])
  }
}

extension FetchAnswer where Item == PartialStateTests.Note {
  /// The same answer with other items (the page's range is its ends').
  fileprivate func withItems(_ ids: [Int], topic: String) -> FetchAnswer {
    FetchAnswer(
      queueID: queueID,
      lastEventID: lastEventID,
      request: request,
      page: FetchPage(
        items: ids.map { PartialStateTests.Note(id: $0, topic: topic) },
        foundOldest: page.foundOldest,
        foundNewest: page.foundNewest
      )
    )
  }
}
