import EventProtocol
import SampleApps
import Testing
import UpdateMachineTesting

@testable import UpdateMachine

@Suite("UpdateMachine core: lifecycle, push hints, freshness")
struct UpdateMachineCoreLifecycleTests {
  private let finger = EventFinger(queueID: queueA, lastEventID: -1)

  @Test("background cancels the long-poll and polls every interval; foreground long-polls at once")
  func backgroundAndForeground() {
    var harness = CoreHarness { $0.backgroundPollInterval = .seconds(300) }
    harness.startLive()
    #expect(harness.core.enteredBackground(now: t0) == [.cancel(request(2))])
    let nextPoll = t0.advanced(by: .seconds(300))
    #expect(harness.core.phase == .idle(finger, nextPollAt: nextPoll))
    #expect(harness.core.nextWakeUp(after: t0.advanced(by: .seconds(1))) == nextPoll)
    #expect(
      harness.core.timerFired(now: nextPoll) == [.poll(request(3), finger, dontBlock: true, timeout: .seconds(30))]
    )
    let after = harness.core.pollSucceeded(request(3), [note(0, "bg")], now: nextPoll)
    let advanced = EventFinger(queueID: queueA, lastEventID: 0)
    #expect(after == [.persist(harness.record, .applied([.note(text: "bg")]))])
    #expect(harness.core.phase == .idle(advanced, nextPollAt: nextPoll.advanced(by: .seconds(300))))

    let back = nextPoll.advanced(by: .seconds(10))
    #expect(
      harness.core.enteredForeground(now: back) == [
        .poll(request(4), advanced, dontBlock: true, timeout: .seconds(30))
      ]
    )
    #expect(harness.core.phase == .polling(advanced))
  }

  @Test("a background interval of nil never polls")
  func neverPollInBackground() {
    var harness = CoreHarness { $0.backgroundPollInterval = nil }
    harness.startLive()
    _ = harness.core.enteredBackground(now: t0)
    #expect(harness.core.phase == .idle(finger, nextPollAt: nil))
    #expect(harness.core.nextWakeUp(after: t0.advanced(by: .seconds(1))) == nil)
  }

  @Test("a push naming an event already applied sends nothing and counts as late")
  func latePush() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.pollSucceeded(request(2), [note(0, "a")], now: t0)
    #expect(harness.core.pushReceived(.init(queueID: queueA, lastEventID: 0), now: t0) == [])
    #expect(harness.core.metrics.pushHintsLate == 1)
  }

  @Test("a push for news while live replaces the long-poll with a dontBlock poll; a second one is remembered")
  func pushWhileLive() {
    var harness = CoreHarness()
    harness.startLive()
    let actions = harness.core.pushReceived(.init(queueID: queueA, lastEventID: 3), now: t0)
    #expect(actions == [.cancel(request(2)), .poll(request(3), finger, dontBlock: true, timeout: .seconds(30))])
    #expect(harness.core.pushReceived(.init(lastEventID: 4), now: t0) == [])
    #expect(harness.core.deferredPushEventID == 4)
    #expect(harness.core.metrics.pushHintsRedundant == 0)
  }

  @Test("a push while idle polls now; while failed, retries now; while stale-registering, is redundant")
  func pushInOtherPhases() {
    var idle = CoreHarness { $0.backgroundPollInterval = nil }
    idle.startLive()
    _ = idle.core.enteredBackground(now: t0)
    #expect(
      idle.core.pushReceived(.init(), now: t0) == [.poll(request(3), finger, dontBlock: true, timeout: .seconds(30))]
    )

    var failed = CoreHarness()
    failed.startLive()
    _ = failed.core.pollFailed(request(2), .serverError(status: 502), now: t0)
    #expect(
      failed.core.pushReceived(.init(), now: t0) == [.poll(request(3), finger, dontBlock: true, timeout: .seconds(30))]
    )

    var registering = CoreHarness()
    _ = registering.core.loaded(nil, now: t0)
    #expect(registering.core.pushReceived(.init(), now: t0) == [])
    #expect(registering.core.metrics.pushHintsRedundant == 1)

    var registerFailed = CoreHarness()
    _ = registerFailed.core.loaded(nil, now: t0)
    _ = registerFailed.core.registerFailed(request(1), .connectionFailed(), now: t0)
    #expect(
      registerFailed.core.pushReceived(.init(), now: t0) == [
        .register(request(2), eventTypes: nil, lifespan: defaultLifespan, clientID: registerFailed.clientID)
      ]
    )
  }

  @Test("freshness is debounced: settling under 300 ms, then connecting; live only once connected")
  func freshnessDebounce() {
    var harness = CoreHarness()
    _ = harness.core.loaded(nil, now: t0)
    #expect(
      harness.core.freshness(now: t0.advanced(by: .milliseconds(299)))
        == FreshnessReport(freshness: .settling, dataAsOf: nil)
    )
    #expect(harness.core.nextWakeUp(after: t0) == t0.advanced(by: .milliseconds(300)))
    #expect(
      harness.core.freshness(now: t0.advanced(by: .milliseconds(300)))
        == FreshnessReport(freshness: .connecting(since: t0), dataAsOf: nil)
    )
    let connectedAt = t0.advanced(by: .milliseconds(100))
    _ = harness.core.registerSucceeded(request(1), registration(notes: []), now: connectedAt)
    let later = connectedAt.advanced(by: .seconds(5))
    #expect(harness.core.freshness(now: later) == FreshnessReport(freshness: .live, dataAsOf: later))
  }

  @Test("a blip shorter than the debounce never leaves live-or-settling; a stale machine is never live")
  func freshnessBlipAndStale() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.pollFailed(request(2), .connectionFailed(), now: t0)
    #expect(harness.core.freshness(now: t0.advanced(by: .milliseconds(50))).freshness == .settling)
    guard case .pollFailed(_, _, let retryAt) = harness.core.phase else { return }
    _ = harness.core.timerFired(now: retryAt)
    _ = harness.core.pollSucceeded(request(3), [], now: retryAt)
    #expect(harness.core.freshness(now: retryAt).freshness == .live)

    _ = harness.core.pollFailed(request(4), .api(.badEventQueueID(queueA)), now: retryAt)
    for milliseconds in [0, 100, 299, 300, 10_000] as [Int64] {
      #expect(harness.core.freshness(now: retryAt.advanced(by: .milliseconds(milliseconds))).freshness != .live)
    }
  }

  @Test("repeated failures make freshness cannotConnect, with the time they began and the reason")
  func cannotConnect() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.pollFailed(request(2), .connectionFailed("offline"), now: t0)
    guard case .pollFailed(_, _, let retryAt) = harness.core.phase else { return }
    _ = harness.core.timerFired(now: retryAt)
    _ = harness.core.pollFailed(request(3), .connectionFailed("still offline"), now: retryAt)
    #expect(
      harness.core.freshness(now: retryAt)
        == FreshnessReport(freshness: .cannotConnect(since: t0, reason: "still offline"), dataAsOf: t0)
    )
  }
}
