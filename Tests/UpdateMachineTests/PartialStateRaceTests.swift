import EventProtocol
import EventServer
import SampleApps
import Testing
import UpdateMachine
import UpdateMachineTesting

/// The chat's client core and server core, moved by hand (``RaceHarness``), registered and holding the
/// whole channel `general`.
typealias ChatRaceHarness = RaceHarness<ChatChannels, ChatReducer>

extension RaceHarness where Application == ChatChannels, Reducer == ChatReducer {
  /// Loads, registers and merges the channel `general` from its very beginning to the very end.
  init(configuration: UpdateMachineConfiguration = .init()) {
    self.init(
      application: ChatChannels(members: ["alice"]),
      reducer: ChatReducer(),
      user: "alice",
      configuration: configuration
    )
    answerRegister()
    let id = fetch(FetchRequest(narrow: .general, anchor: .oldest, before: 0, after: 100))
    try! answerFetch(id)
  }

  /// The server runs a command from another member.
  mutating func command(_ command: ChatCommand) {
    try! serverCommand(command, from: "carol")
  }

  var messages: PartialState<ChatMessage> { core.confirmedState!.messages }

  /// How many times the text shows in what the app displays: known messages and pending posts.
  func timesShown(_ text: String) -> Int {
    let state = core.displayedState!
    return state.messages.list(.general).items.filter { $0.text == text }.count
      + state.pendingPosts.filter { $0 == text }.count
  }
}

extension Narrow {
  static let general = Narrow([NarrowTerm("channel", "general")])
}

/// The three event-vs-fetch races from Zulip's trackers, each composed exactly once.
@Suite("Partial state: Zulip's event-vs-fetch races")
struct PartialStateRaceTests {
  /// zulip-mobile #5434: an edit that lands between the server's read of a page and the client's receipt of
  /// it must count once; one that lands before the read must not be lost.
  @Test("mobile #5434: an edit around a fetch is applied once, never twice, never lost")
  func editAroundFetch() throws {
    var harness = ChatRaceHarness()
    harness.command(.post(channel: "general", text: "hello"))
    harness.answerPoll()
    #expect(harness.messages.item(1).item?.reactions == 0)

    // The page is read first, the reaction lands after the read, its event is applied before the answer.
    let first = harness.fetch(FetchRequest(narrow: .general, anchor: .newest, before: 10, after: 0))
    let early = try harness.readPage(first)
    harness.command(.react(1))
    harness.answerPoll()
    harness.deliver(first, early)
    #expect(harness.outcomes[first] == .merged)
    #expect(
      harness.messages.item(1)
        == .known(ChatMessage(id: 1, channel: "general", sender: "carol", text: "hello", reactions: 1))
    )

    // The reaction lands before the read; the answer arrives before the client polls its event.
    let second = harness.fetch(FetchRequest(narrow: .general, anchor: .newest, before: 10, after: 0))
    harness.command(.react(1))
    try harness.answerFetch(second)
    #expect(harness.outcomes[second] == nil, "the page is ahead of the finger: held")
    #expect(harness.messages.item(1).item?.reactions == 1)
    harness.answerPoll()
    #expect(harness.outcomes[second] == .merged)
    #expect(harness.messages.item(1).item?.reactions == 2)
    #expect(harness.core.metrics.eventsReplayedOnPages == 1)
  }

  /// zulip-flutter #929: a message whose event and fetched copy race must show once.
  @Test("flutter #929: a new message in both a page and an event shows once")
  func messageInPageAndEvent() throws {
    var harness = ChatRaceHarness()
    let id = harness.fetch(FetchRequest(narrow: .general, anchor: .newest, before: 10, after: 0))
    harness.command(.post(channel: "general", text: "race"))
    let page = try harness.readPage(id)
    #expect(page.page.items.map(\.text) == ["race"])
    harness.answerPoll()
    #expect(harness.timesShown("race") == 1)
    harness.deliver(id, page)
    #expect(harness.outcomes[id] == .merged)
    #expect(harness.timesShown("race") == 1)
    #expect(harness.messages.list(.general).items.map(\.id) == [1])
  }

  /// zulip-flutter #2397: the outbox's placeholder of an own message and its fetched copy must not show
  /// together.
  @Test("flutter #2397: an own message shows once, as a placeholder or as the fetched copy")
  func placeholderAndFetchedCopy() throws {
    var harness = ChatRaceHarness()
    harness.submit(.post(channel: "general", text: "mine"))
    #expect(harness.timesShown("mine") == 1)
    harness.deliverSubmitLosingAnswer()
    let id = harness.fetch(FetchRequest(narrow: .general, anchor: .newest, before: 10, after: 0))
    try harness.answerFetch(id)
    #expect(harness.outcomes[id] == nil, "the page holds the write's event: held until the finger reaches it")
    #expect(harness.timesShown("mine") == 1)
    harness.answerPoll()
    #expect(harness.outcomes[id] == .merged)
    #expect(harness.core.pendingMutations.isEmpty)
    #expect(harness.timesShown("mine") == 1)
  }

  /// A fetch asked of a stopped machine fails at once (the app is not left waiting until a resume).
  @Test("a stopped machine answers a fetch at once with a failure")
  func fetchWhileStopped() {
    var harness = ChatRaceHarness()
    let (pollID, _) = harness.polls.first!
    harness.perform(harness.core.pollFailed(pollID, .api(.unauthorized("revoked")), now: harness.now))
    let id = harness.fetch(FetchRequest(narrow: .general, anchor: .newest, before: 5, after: 0))
    guard case .failed = harness.outcomes[id] else {
      Issue.record("expected a failure, got \(String(describing: harness.outcomes[id]))")
      return
    }
    #expect(harness.fetches[id] == nil)
  }

  /// A page read against a queue that has since been replaced means nothing to the new finger: it is asked
  /// for again, and what was known before shows as stale until then.
  @Test("a page of an old queue is fetched again; known items go stale on re-registration")
  func pageOfOldQueue() throws {
    var harness = ChatRaceHarness()
    harness.command(.post(channel: "general", text: "old"))
    harness.answerPoll()
    let id = harness.fetch(FetchRequest(narrow: .general, anchor: .newest, before: 10, after: 0))
    let page = try harness.readPage(id)
    // The queue is lost; the machine registers again.
    let (pollID, _) = harness.polls.first!
    harness.perform(harness.core.pollFailed(pollID, .api(.badEventQueueID("gone")), now: harness.now))
    harness.answerRegister()
    #expect(
      harness.messages.item(1)
        == .stale(ChatMessage(id: 1, channel: "general", sender: "carol", text: "old", reactions: 0))
    )
    #expect(harness.messages.list(.general).itemsToShow.map(\.text) == ["old"])
    harness.deliver(id, page)
    #expect(harness.outcomes[id] == nil, "asked again against the new queue")
    #expect(harness.fetches[id] != nil)
    for pending in Array(harness.fetches.keys) { try harness.answerFetch(pending) }
    #expect(harness.outcomes[id] == .merged)
    #expect(harness.messages.item(1).item?.text == "old")
    if case .known = harness.messages.item(1) {} else { Issue.record("item 1 should be known again") }
  }
}

/// The memory bound is the app's: set in the machine's configuration, applied whatever the snapshot said,
/// enforced whenever it is passed, never on what the app shows.
@Suite("Partial state: the app's memory bound and what it shows")
struct PartialLimitsTests {
  static func channel(_ name: String) -> Narrow { Narrow([NarrowTerm("channel", name)]) }

  static func whole(_ name: String) -> FetchRequest {
    FetchRequest(narrow: channel(name), anchor: .oldest, before: 0, after: 100)
  }

  @Test("the app's limits replace the snapshot's; a shown narrow stays past them; events passing them evict")
  func appLimitsAndShown() throws {
    var configuration = UpdateMachineConfiguration()
    configuration.partialLimits = PartialLimits(narrows: 2, items: 100)
    var harness = ChatRaceHarness(configuration: configuration)
    #expect(harness.messages.narrowLimit == 2, "the app's limit, not the snapshot's default of 50")
    for name in ["a", "b"] { harness.command(.post(channel: name, text: "in \(name)")) }
    harness.answerPoll()
    // general is on screen; a and b are fetched after it.
    harness.core.show([.general])
    try harness.answerFetch(harness.fetch(Self.whole("a")))
    try harness.answerFetch(harness.fetch(Self.whole("b")))
    // Three narrows past a limit of two: a goes (least recently used), general stays, being shown.
    #expect(Set(harness.messages.heldNarrows) == [.general, Self.channel("b")])
    // The app stops showing general and shows b: a page of a evicts general now.
    harness.core.show([Self.channel("b")])
    try harness.answerFetch(harness.fetch(Self.whole("a")))
    #expect(Set(harness.messages.heldNarrows) == [Self.channel("a"), Self.channel("b")])
  }

  @Test("the item bound is enforced after events, not only when a page lands")
  func evictionAfterEvents() throws {
    var configuration = UpdateMachineConfiguration()
    configuration.partialLimits = PartialLimits(narrows: 10, items: 3)
    var harness = ChatRaceHarness(configuration: configuration)
    harness.command(.post(channel: "a", text: "a1"))
    harness.answerPoll()
    try harness.answerFetch(harness.fetch(Self.whole("a")))
    harness.core.show([Self.channel("a")])
    #expect(harness.messages.heldNarrows.count == 2)
    // New messages in general (held, complete to the very end) pass the item bound: general, not shown, goes.
    for index in 1...3 { harness.command(.post(channel: "general", text: "g\(index)")) }
    harness.answerPoll()
    #expect(harness.messages.heldNarrows == [Self.channel("a")])
    #expect(harness.messages.known.count <= 3)
  }
}

/// A fetch the app asks for is the engine's to get there: retried after failures worth retrying, one
/// identity for identical requests, cancellable, its progress in the snapshot.
@Suite("Partial state: fetches the engine owns")
struct EngineFetchTests {
  static let older = FetchRequest(narrow: .general, anchor: .newest, before: 20, after: 0)

  @Test("a fetch that fails for want of a connection is retried after the backoff, never reported failed")
  func retriedUntilMerged() throws {
    var harness = ChatRaceHarness()
    harness.command(.post(channel: "general", text: "one"))
    harness.answerPoll()
    let id = harness.fetch(Self.older)
    #expect(harness.core.fetchStatuses.map(\.progress) == [.loading(attempt: 1)])
    harness.failFetch(id, .connectionFailed())
    #expect(harness.outcomes[id] == nil, "a lost connection is no reason to give up")
    guard case .retrying(1, let failure, let retryAt) = harness.core.fetchStatuses.first?.progress else {
      Issue.record("no retry planned: \(harness.core.fetchStatuses)")
      return
    }
    #expect(failure.kind == .connectionFailed)
    #expect(retryAt > harness.now && harness.core.nextWakeUp(after: harness.now) == retryAt)
    #expect(harness.fetches[id] == nil, "not sent again before the backoff")
    harness.perform(harness.core.timerFired(now: retryAt))
    #expect(harness.core.fetchStatuses.map(\.progress) == [.loading(attempt: 2)])
    try harness.answerFetch(id)
    #expect(harness.outcomes[id] == .merged)
    #expect(harness.core.fetchStatuses.isEmpty)
  }

  @Test("a request the server refuses ends the fetch as failed")
  func refusedEnds() throws {
    var harness = ChatRaceHarness()
    let id = harness.fetch(Self.older)
    let refusal = TransportError.api(.badRequest("no such narrow"))
    harness.failFetch(id, refusal)
    #expect(harness.outcomes[id] == .failed(refusal))
    #expect(harness.core.fetchStatuses.isEmpty)
  }

  @Test("identical requests share one fetch; cancelling it ends it and drops its late answer")
  func sharedAndCancelled() throws {
    var harness = ChatRaceHarness()
    let first = harness.fetch(Self.older)
    let second = harness.fetch(Self.older)
    #expect(first == second)
    #expect(harness.core.fetchStatuses.count == 1)
    let page = try harness.readPage(first)
    harness.perform(harness.core.cancelFetch(first))
    #expect(harness.outcomes[first] == .failed(.cancelled))
    #expect(harness.core.fetchStatuses.isEmpty)
    let before = harness.messages
    harness.deliver(first, page)
    #expect(harness.messages == before, "a cancelled fetch's answer is dropped")
  }
}
