import EventProtocol
import SampleApps
import Testing
import UpdateMachineTesting

@testable import UpdateMachine

@Suite("UpdateMachine core: start, register, poll")
struct UpdateMachineCoreTests {
  @Test("state is unknown until loaded; a first start persists a client id and registers")
  func firstStart() {
    var harness = CoreHarness()
    #expect(harness.core.confirmedState == nil && harness.core.displayedState == nil)
    #expect(harness.core.nextWakeUp(after: t0) == nil)
    let actions = harness.core.loaded(nil, now: t0)
    #expect(
      actions == [
        .persist(harness.record, .replaced),
        .register(request(1), eventTypes: nil, lifespan: defaultLifespan, clientID: harness.clientID),
      ]
    )
    #expect(harness.core.phase == .registering)
    #expect(harness.core.confirmedState == NoteSnapshot(notes: []))
  }

  @Test("a stored finger resumes live with a dontBlock poll, then long-polls; in the background, idle with a poll now")
  func resumeFromRecord() {
    var first = CoreHarness()
    first.startLive(notes: ["kept"])
    let stored = first.record

    var foreground = CoreHarness()
    foreground.advance(.seconds(10))
    let resumed = foreground.core.loaded(stored, now: foreground.now)
    #expect(
      resumed == [
        .poll(request(1), EventFinger(queueID: queueA, lastEventID: -1), dontBlock: true, timeout: .seconds(30))
      ]
    )
    let longPoll = foreground.core.pollSucceeded(request(1), [], now: foreground.now)
    #expect(
      longPoll.last
        == .poll(request(2), EventFinger(queueID: queueA, lastEventID: -1), dontBlock: false, timeout: .seconds(90))
    )
    #expect(foreground.core.confirmedState == NoteSnapshot(notes: ["kept"]))
    #expect(foreground.core.clientID == first.core.clientID)

    var background = CoreHarness(lifecycle: .background)
    let polled = background.core.loaded(stored, now: t0)
    #expect(
      polled == [
        .poll(request(1), EventFinger(queueID: queueA, lastEventID: -1), dontBlock: true, timeout: .seconds(30))
      ]
    )
    #expect(background.core.phase == .idle(EventFinger(queueID: queueA, lastEventID: -1), nextPollAt: nil))
  }

  @Test("register success replaces the state only then, persists, then long-polls")
  func registerSuccess() {
    var first = CoreHarness()
    first.startLive(notes: ["old"])
    _ = first.core.pollFailed(request(2), .api(.badEventQueueID(queueA)), now: t0)
    #expect(first.core.phase == .registering)
    #expect(first.core.confirmedState == NoteSnapshot(notes: ["old"]))

    let actions = first.core.registerSucceeded(
      request(3),
      registration(queueB, lastEventID: 4, notes: ["new"]),
      now: t0
    )
    let finger = EventFinger(queueID: queueB, lastEventID: 4)
    #expect(
      actions == [
        .persist(first.record, .replaced), .poll(request(4), finger, dontBlock: false, timeout: .seconds(90)),
      ]
    )
    #expect(first.core.phase == .polling(finger))
    #expect(first.core.confirmedState == NoteSnapshot(notes: ["new"]))
    #expect(first.record.finger == finger)
  }

  @Test("a batch applies in id order, the finger advances after it, and the persist comes before the next poll")
  func batchApplied() {
    var harness = CoreHarness()
    harness.startLive()
    let events = [
      note(0, "a"), note(2, "b"), EventEnvelope(id: 3, body: .heartbeat),
      EventEnvelope(id: 5, body: .unknown(type: "x")),
    ]
    let actions = harness.core.pollSucceeded(request(2), events, now: t0)
    let finger = EventFinger(queueID: queueA, lastEventID: 5)
    #expect(harness.core.confirmedState == NoteSnapshot(notes: ["a", "b"]))
    let applied: [NoteEvent] = [.note(text: "a"), .note(text: "b")]
    #expect(
      actions == [
        .persist(harness.record, .applied(AppliedEvents(applied))),
        .poll(request(3), finger, dontBlock: false, timeout: .seconds(90)),
      ]
    )
    #expect(harness.record.finger == finger && harness.record.state == NoteSnapshot(notes: ["a", "b"]))
    #expect(harness.core.metrics.eventsApplied == 2)
  }

  @Test("events at or below the finger are never applied again")
  func noDoubleApply() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.pollSucceeded(request(2), [note(0, "a"), note(1, "b")], now: t0)
    _ = harness.core.pollSucceeded(request(3), [note(0, "a"), note(1, "b"), note(2, "c")], now: t0)
    #expect(harness.core.confirmedState == NoteSnapshot(notes: ["a", "b", "c"]))
    #expect(harness.core.phase == .polling(EventFinger(queueID: queueA, lastEventID: 2)))
  }

  @Test(
    "a decreasing or repeated id, or a reducer failure, drops the batch and re-registers after the slow backoff",
    arguments: [
      [note(0, "a"), note(0, "a")],
      [note(1, "a"), note(0, "b")],
      [note(0, "a"), note(1, NotesReducer.poison), note(2, "c")],
    ]
  )
  func protocolErrors(events: [EventEnvelope<NoteEvent>]) throws {
    var harness = CoreHarness()
    harness.startLive(notes: ["before"])
    let actions = harness.core.pollSucceeded(request(2), events, now: t0)
    #expect(harness.core.confirmedState == NoteSnapshot(notes: ["before"]))
    #expect(actions == [.persist(harness.record, .applied([]))])
    #expect(harness.record.finger == nil)
    guard case .registerFailed(1, let retryAt) = harness.core.phase else {
      Issue.record("phase \(harness.core.phase)")
      return
    }
    #expect(retryAt > t0 && retryAt <= t0.advanced(by: .seconds(1)))
    #expect(
      harness.core.timerFired(now: retryAt) == [
        .register(request(3), eventTypes: nil, lifespan: defaultLifespan, clientID: harness.clientID)
      ]
    )
  }

  @Test("the long-poll timeout is the server's recommendation, 90 s when it gives none")
  func longPollTimeout() {
    var harness = CoreHarness()
    _ = harness.core.loaded(nil, now: t0)
    let reply = Registration(
      queueID: queueA,
      lastEventID: -1,
      longPollTimeout: .seconds(30),
      snapshot: NoteSnapshot(notes: [])
    )
    let actions = harness.core.registerSucceeded(request(1), reply, now: t0)
    #expect(actions.last == .poll(request(2), reply.finger, dontBlock: false, timeout: .seconds(30)))

    var fallback = CoreHarness()
    _ = fallback.core.loaded(nil, now: t0)
    var silent = reply
    silent.longPollTimeout = nil
    #expect(
      fallback.core.registerSucceeded(request(1), silent, now: t0).last
        == .poll(request(2), reply.finger, dontBlock: false, timeout: .seconds(90))
    )
  }

  @Test("a finger whose queue must have expired goes stale without sending the doomed poll")
  func expiredByClock() {
    var first = CoreHarness()
    first.startLive(notes: ["x"])
    var restarted = CoreHarness()
    restarted.advance(UpdateMachineConfiguration().assumedQueueLifetime)
    let actions = restarted.core.loaded(first.record, now: restarted.now)
    var staleRecord = first.record
    staleRecord.finger = nil
    #expect(
      actions == [
        .persist(staleRecord, .replaced),
        .register(request(1), eventTypes: nil, lifespan: defaultLifespan, clientID: restarted.clientID),
      ]
    )
    #expect(restarted.core.phase == .registering)
    #expect(restarted.core.confirmedState == NoteSnapshot(notes: ["x"]))
  }

  @Test("answers to requests that are no longer under way are ignored")
  func staleAnswersIgnored() {
    var harness = CoreHarness()
    harness.startLive()
    let before = harness.record
    #expect(harness.core.pollSucceeded(request(99), [note(0, "ghost")], now: t0) == [])
    #expect(harness.core.registerSucceeded(request(1), registration(notes: ["ghost"]), now: t0) == [])
    #expect(harness.core.pollFailed(request(98), .timedOut, now: t0) == [])
    #expect(harness.record == before)
  }
}
