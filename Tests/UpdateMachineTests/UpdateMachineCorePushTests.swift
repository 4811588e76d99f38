import EventProtocol
import SampleApps
import Testing

@testable import UpdateMachine

private let finger = EventFinger(queueID: queueA, lastEventID: -1)

@Suite("UpdateMachine core: pushes that carry events")
struct UpdateMachineCorePushTests {
  @Test("a push whose events continue the finger is applied with no request, in the background too")
  func continuingPushApplied() {
    var harness = CoreHarness()
    harness.startLive(notes: ["a"])
    _ = harness.core.enteredBackground(now: t0)
    let before = harness.core.metrics.polls
    let push = Core.PushHint(queueID: queueA, lastEventID: 1, events: [note(0, "b"), note(1, "c")])
    let actions = harness.core.pushReceived(push, now: t0)
    let advanced = EventFinger(queueID: queueA, lastEventID: 1)
    #expect(harness.core.phase == .idle(advanced, nextPollAt: t0.advanced(by: .seconds(15 * 60))))
    #expect(actions == [.persist(harness.record, .applied([.note(text: "b"), .note(text: "c")]))])
    #expect(harness.core.confirmedState == NoteSnapshot(notes: ["a", "b", "c"]))
    #expect(harness.core.metrics.polls == before)
    #expect(harness.core.metrics.pushesApplied == 1)
    #expect(harness.record.finger == advanced)
  }

  @Test("a push that does not continue the finger (a gap, another queue, no events) costs one poll")
  func nonContinuingPushPolls() {
    let cases: [Core.PushHint] = [
      Core.PushHint(queueID: queueA, lastEventID: 2, events: [note(1, "b"), note(2, "c")]),
      Core.PushHint(queueID: queueB, lastEventID: 0, events: [note(0, "b")]),
      Core.PushHint(queueID: queueA, lastEventID: 0, events: nil),
      Core.PushHint(queueID: queueA, lastEventID: 1, events: [note(0, "b")]),
    ]
    for push in cases {
      var harness = CoreHarness()
      harness.startLive()
      _ = harness.core.enteredBackground(now: t0)
      let actions = harness.core.pushReceived(push, now: t0)
      #expect(actions == [.poll(request(3), finger, dontBlock: true, timeout: .seconds(30))], "\(push)")
      #expect(harness.core.confirmedState == NoteSnapshot(notes: []))
    }
  }

  @Test("a redundant push (events already applied) costs nothing")
  func redundantPush() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.pollSucceeded(request(2), [note(0, "b")], now: t0)
    let actions = harness.core.pushReceived(
      Core.PushHint(queueID: queueA, lastEventID: 0, events: [note(0, "b")]),
      now: t0
    )
    #expect(actions == [])
    #expect(harness.core.confirmedState == NoteSnapshot(notes: ["b"]))
    #expect(harness.core.metrics.pushHintsLate == 1)
  }

  @Test("a pushed event with this client's origin retires the write, and a poisoned push falls back to a poll")
  func pushedOwnEventsAndFailures() throws {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.enteredBackground(now: t0)
    _ = harness.submit(.post("mine", to: [alice]), now: t0)
    let origin = MutationOrigin(clientID: harness.clientID, mutationID: MutationID(1))
    let own = EventEnvelope<NoteEvent>(id: 0, body: .payload(.note(text: "mine")), origin: origin)
    _ = harness.core.pushReceived(Core.PushHint(queueID: queueA, lastEventID: 0, events: [own]), now: t0)
    #expect(harness.core.pendingMutations.isEmpty)
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["mine"]))

    let poisoned = Core.PushHint(queueID: queueA, lastEventID: 1, events: [note(1, NotesReducer.poison)])
    let actions = harness.core.pushReceived(poisoned, now: t0)
    #expect(actions.contains { if case .poll = $0 { true } else { false } })
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["mine"]))
  }

  @Test("the push payload from the wire becomes a hint with its events")
  func payloadToHint() {
    let payload = PushPayload<NoteEvent>(queueID: queueA, lastEventID: 0, events: [note(0, "x")])
    #expect(Core.PushHint(payload) == Core.PushHint(queueID: queueA, lastEventID: 0, events: [note(0, "x")]))
  }

  @Test("a push during a non-blocking poll that was answered before the event makes the machine poll once more")
  func pushDuringShortPoll() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.enteredBackground(now: t0)
    _ = harness.core.pushReceived(.init(), now: t0)
    #expect(harness.core.inFlight == .poll(request(3), longPoll: false, deadline: t0.advanced(by: .seconds(30))))
    // The server answered that poll with nothing; meanwhile an event 0 was queued and pushed.
    #expect(harness.core.pushReceived(.init(queueID: queueA, lastEventID: 0), now: t0) == [])
    let actions = harness.core.pollSucceeded(request(3), [], now: t0)
    #expect(actions.last == .poll(request(4), finger, dontBlock: true, timeout: .seconds(30)))
    // Had the answer reached the pushed event, no second poll.
    _ = harness.core.pushReceived(.init(queueID: queueA, lastEventID: 0), now: t0)
    let caughtUp = harness.core.pollSucceeded(request(4), [note(0, "x")], now: t0)
    #expect(caughtUp == [.persist(harness.record, .applied([.note(text: "x")]))])
  }
}
