import EventProtocol
import SampleApps
import Testing

@testable import UpdateMachine

private let finger = EventFinger(queueID: queueA, lastEventID: -1)

@Suite("UpdateMachine core: deadlines, defaults, network input, stopping and resuming, server timings")
struct UpdateMachineCoreDeadlineTests {
  @Test("a register that never answers is cancelled at its deadline and retried as a connection failure")
  func registerDeadline() {
    var harness = CoreHarness()
    _ = harness.core.loaded(nil, now: t0)
    let deadline = t0.advanced(by: UpdateMachineConfiguration().registerTimeout)
    #expect(harness.core.inFlight == .register(request(1), deadline: deadline))
    #expect(harness.core.nextWakeUp(after: t0) == t0.advanced(by: .milliseconds(300)))
    #expect(harness.core.nextWakeUp(after: t0.advanced(by: .seconds(1))) == deadline)
    #expect(harness.core.timerFired(now: deadline.advanced(by: .milliseconds(-1))) == [])
    let actions = harness.core.timerFired(now: deadline)
    #expect(actions == [.cancel(request(1))])
    guard case .registerFailed(attempt: 1, let retryAt) = harness.core.phase else {
      Issue.record("phase \(harness.core.phase)")
      return
    }
    #expect(retryAt <= deadline.advanced(by: .milliseconds(100)))
    #expect(harness.core.registerSucceeded(request(1), registration(notes: ["late"]), now: deadline) == [])
    #expect(
      harness.core.timerFired(now: retryAt) == [
        .register(request(2), eventTypes: nil, lifespan: defaultLifespan, clientID: harness.clientID)
      ]
    )
  }

  @Test("a submit that never answers is cancelled at its deadline and sent again after the backoff")
  func submitDeadline() throws {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.submit(.post("mine", to: [alice]), now: t0)
    let deadline = t0.advanced(by: UpdateMachineConfiguration().submitTimeout)
    #expect(harness.core.nextWakeUp(after: t0.advanced(by: .seconds(1))) == deadline)
    let actions = harness.core.timerFired(now: deadline)
    #expect(actions == [.cancel(request(3))])
    let retryAt = try #require(harness.core.nextWakeUp(after: deadline))
    #expect(retryAt <= deadline.advanced(by: .milliseconds(100)))
    let resent = harness.core.timerFired(now: retryAt)
    guard case .submit(request(4), let body, _)? = resent.first else {
      Issue.record("expected a resend, got \(resent)")
      return
    }
    #expect(body.requests.map(\.mutationID) == [MutationID(1)])
    #expect(harness.core.pendingMutations.map(\.attempts) == [2])
  }

  @Test("a long-poll past the recommended timeout is cancelled as a timeout and retried with dontBlock")
  func longPollDeadline() {
    var harness = CoreHarness()
    harness.startLive()
    let deadline = t0.advanced(by: .seconds(90))
    #expect(harness.core.inFlight == .poll(request(2), longPoll: true, deadline: deadline))
    #expect(harness.core.timerFired(now: deadline) == [.cancel(request(2))])
    guard case .pollFailed(finger, attempt: 1, let retryAt) = harness.core.phase else {
      Issue.record("phase \(harness.core.phase)")
      return
    }
    #expect(
      harness.core.timerFired(now: retryAt) == [.poll(request(3), finger, dontBlock: true, timeout: .seconds(30))]
    )
  }

  @Test("with the defaults, the first background poll uses the finger, and an app opened an hour later resumes")
  func defaultsKeepTheQueueAcrossTheBackground() throws {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.enteredBackground(now: t0)
    let firstPoll = try #require(harness.core.nextWakeUp(after: t0.advanced(by: .seconds(1))))
    #expect(firstPoll == t0.advanced(by: .seconds(15 * 60)))
    #expect(
      harness.core.timerFired(now: firstPoll) == [.poll(request(3), finger, dontBlock: true, timeout: .seconds(30))]
    )
    #expect(harness.core.metrics.registers == 1)

    var away = CoreHarness()
    away.startLive()
    _ = away.core.enteredBackground(now: t0)
    let anHourLater = t0.advanced(by: .seconds(3600))
    let opened = away.core.enteredForeground(now: anHourLater)
    #expect(opened == [.poll(request(3), finger, dontBlock: true, timeout: .seconds(30))])
    #expect(away.core.metrics.registers == 1)
  }

  @Test("a background interval not shorter than the queue lifetime is a configuration error with a clear message")
  func backgroundIntervalMustBeShorterThanTheLifetime() {
    var configuration = UpdateMachineConfiguration()
    #expect(configuration.problems.isEmpty)
    configuration.queueLifespan = nil
    #expect(configuration.problems.count == 1)
    #expect(configuration.problems.first?.contains("backgroundPollInterval") == true)
    #expect(throws: ConfigurationError.self) { try configuration.validate() }
    configuration.backgroundPollInterval = .seconds(300)
    #expect(configuration.problems.isEmpty)
  }

  @Test("a machine made with an invalid configuration traps, naming the problem")
  func invalidConfigurationTraps() async {
    await #expect(processExitsWith: .failure) {
      var configuration = UpdateMachineConfiguration()
      configuration.queueLifespan = .seconds(60)
      _ = Core(
        reducer: NotesReducer(user: "alice"),
        configuration: configuration,
        random: SystemRandomNumberGenerator()
      )
    }
  }

  @Test("networkLost fails the request under way at once; networkBecameAvailable retries now with a reset backoff")
  func networkInput() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.pollSucceeded(request(2), [], now: t0)
    let lost = harness.core.networkLost(now: t0)
    #expect(lost == [.cancel(request(3))])
    guard case .pollFailed(finger, attempt: 1, let retryAt) = harness.core.phase else {
      Issue.record("phase \(harness.core.phase)")
      return
    }
    #expect(retryAt > t0)
    #expect(harness.core.freshness(now: t0).freshness == .settling)
    let later = t0.advanced(by: .milliseconds(5))
    let back = harness.core.networkBecameAvailable(now: later)
    #expect(back == [.poll(request(4), finger, dontBlock: true, timeout: .seconds(30))])
    _ = harness.core.pollFailed(request(4), .connectionFailed(), now: later)
    #expect(harness.core.phase.description.contains("#1"))
  }

  @Test("an hour after networkLost costs one probe every 5 minutes, not a request at every backoff step")
  func noRequestStormOffline() {
    func requestsInAnHourOffline(probe: Duration?, reportLost: Bool) -> Int {
      var harness = CoreHarness { $0.offlineProbeInterval = probe }
      harness.startLive()
      _ = harness.submit(.post("waiting", to: [alice]), now: t0)
      var pending: [Action] = reportLost ? harness.core.networkLost(now: t0) : []
      pending += harness.core.pollFailed(request(2), .connectionFailed(), now: t0)
      var requests = 0
      var now = t0
      let end = t0.advanced(by: .seconds(3600))
      while now < end {
        // Every request fails at once: the network is gone.
        for action in harness.acknowledgingSaves(pending, now: now) {
          switch action {
          case .register(let id, _, _, _):
            requests += 1
            pending = harness.core.registerFailed(id, .connectionFailed(), now: now)
          case .poll(let id, _, _, _):
            requests += 1
            pending = harness.core.pollFailed(id, .connectionFailed(), now: now)
          case .submit(let id, _, _):
            requests += 1
            pending = harness.core.submitFailed(id, .connectionFailed(), now: now)
          default: continue
          }
        }
        guard let wake = harness.core.nextWakeUp(after: now) else { break }
        now = wake
        pending += harness.core.timerFired(now: now)
      }
      return requests
    }
    // Measured: 22 requests in the hour (a poll and the outbox's write, each probed every 5 minutes);
    // 0 with no probe; 1,485 when the platform's report is not given (the failure backoff, capped at 10 s).
    #expect(requestsInAnHourOffline(probe: .seconds(300), reportLost: true) <= 30)
    #expect(requestsInAnHourOffline(probe: nil, reportLost: true) <= 2)
    #expect(requestsInAnHourOffline(probe: .seconds(300), reportLost: false) > 300)
  }

  @Test("a push ends the offline wait at once")
  func offlineWaitEnds() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.networkLost(now: t0)
    guard case .pollFailed(_, _, let retryAt) = harness.core.phase else {
      Issue.record("phase \(harness.core.phase)")
      return
    }
    #expect(t0.duration(to: retryAt) >= .seconds(300))
    let pushed = harness.core.pushReceived(.init(), now: t0.advanced(by: .seconds(1)))
    #expect(pushed.contains { if case .poll = $0 { true } else { false } })
  }

  @Test("networkBecameAvailable also ends the outbox's wait after a connection failure")
  func networkInputWakesTheOutbox() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.submit(.post("mine", to: [alice]), now: t0)
    _ = harness.core.submitFailed(request(3), .connectionFailed(), now: t0)
    _ = harness.core.pollFailed(request(2), .connectionFailed(), now: t0)
    let actions = harness.core.networkBecameAvailable(now: t0)
    #expect(actions.contains { if case .submit(request(5), _, _) = $0 { true } else { false } })
  }

  @Test("unauthorized on a poll stops with the finger and outbox kept; resume polls with that finger")
  func stopAndResume() {
    var harness = CoreHarness()
    harness.startLive(notes: ["kept"])
    _ = harness.submit(.post("pending", to: [alice]), now: t0)
    let stopped = harness.core.pollFailed(request(2), .api(.unauthorized("expired token")), now: t0)
    #expect(harness.core.phase == .stopped(.unauthorized(message: "expired token"), finger: finger))
    #expect(stopped == [.cancel(request(3)), .persist(harness.record, .applied([]))])
    #expect(harness.record.finger == finger)
    #expect(harness.core.pendingMutations.count == 1)
    #expect(harness.core.pushReceived(.init(), now: t0) == [])
    let resumed = harness.core.resume(now: t0)
    #expect(harness.core.phase == .polling(finger))
    #expect(
      resumed == [
        .poll(request(4), finger, dontBlock: true, timeout: .seconds(30)),
        .submit(
          request(5),
          MutationBatch(requests: [
            MutationRequest(
              clientID: harness.core.clientID!,
              mutationID: MutationID(1),
              mutation: .post("pending", to: [alice])
            )
          ]),
          queueID: queueA
        ),
      ]
    )
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["kept", "pending"]))
  }

  @Test("a huge retry-after is cut to the maximum, and a return to the foreground keeps only that")
  func retryAfterClamped() throws {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.pollFailed(request(2), .api(.rateLimitHit(retryAfter: .seconds(1_000_000_000))), now: t0)
    guard case .pollFailed(_, _, let retryAt) = harness.core.phase else {
      Issue.record("phase \(harness.core.phase)")
      return
    }
    #expect(retryAt == t0.advanced(by: UpdateMachineConfiguration().maximumRetryAfter))
  }

  @Test("a recommended long-poll timeout of zero, or of a day, is clamped to 10 s … 10 min")
  func longPollTimeoutClamped() {
    for (recommended, used) in [(Duration.zero, Duration.seconds(10)), (.seconds(86_400), .seconds(600))] {
      var harness = CoreHarness()
      _ = harness.core.loaded(nil, now: t0)
      let reply = Registration(
        queueID: queueA,
        lastEventID: -1,
        longPollTimeout: recommended,
        snapshot: NoteSnapshot(notes: [])
      )
      let actions = harness.core.registerSucceeded(request(1), reply, now: t0)
      #expect(actions.last == .poll(request(2), finger, dontBlock: false, timeout: used))
    }
  }
}
