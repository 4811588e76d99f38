import EventProtocol
import SampleApps
import Testing
import UpdateMachineTesting

@testable import UpdateMachine

@Suite("UpdateMachine core: failures and backoff")
struct UpdateMachineCoreFailureTests {
  private let finger = EventFinger(queueID: queueA, lastEventID: -1)

  @Test(
    "connection failures, timeouts and 5xx retry the same finger after backoff, first with dontBlock",
    arguments: [TransportError.connectionFailed(), .timedOut, .serverError(status: 503)]
  )
  func retrySameFinger(error: TransportError) throws {
    var harness = CoreHarness()
    harness.startLive()
    #expect(harness.core.pollFailed(request(2), error, now: t0) == [])
    guard case .pollFailed(finger, attempt: 1, let retryAt) = harness.core.phase else {
      Issue.record("phase \(harness.core.phase)")
      return
    }
    #expect(retryAt > t0 && retryAt <= t0.advanced(by: .milliseconds(100)))
    #expect(harness.core.nextWakeUp(after: t0) == retryAt)
    #expect(
      harness.core.timerFired(now: retryAt) == [.poll(request(3), finger, dontBlock: true, timeout: .seconds(30))]
    )
    #expect(harness.core.phase == .polling(finger))
    let next = harness.core.pollSucceeded(request(3), [], now: retryAt)
    #expect(next.last == .poll(request(4), finger, dontBlock: false, timeout: .seconds(90)))
  }

  @Test("a rate limit waits at least its retry-after")
  func rateLimit() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.pollFailed(request(2), .api(.rateLimitHit(retryAfter: .seconds(28))), now: t0)
    #expect(harness.core.phase == .pollFailed(finger, attempt: 1, retryAt: t0.advanced(by: .seconds(28))))
  }

  @Test("BAD_EVENT_QUEUE_ID goes stale and re-registers at once, keeping the old state")
  func badEventQueueID() {
    var harness = CoreHarness()
    harness.startLive(notes: ["shown"])
    let actions = harness.core.pollFailed(request(2), .api(.badEventQueueID(queueA)), now: t0)
    #expect(
      actions == [
        .persist(harness.record, .applied([])),
        .register(request(3), eventTypes: nil, lifespan: defaultLifespan, clientID: harness.clientID),
      ]
    )
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["shown"]))
  }

  @Test(
    "malformed answers and other 4xx on a poll re-register after the slower backoff",
    arguments: [EventAPIError.malformedResponse("bad"), .badRequest("no"), .alreadyPruned(lastEventID: 3)]
  )
  func protocolErrorsOnPoll(error: EventAPIError) {
    var harness = CoreHarness()
    harness.startLive()
    let actions = harness.core.pollFailed(request(2), .api(error), now: t0)
    #expect(actions == [.persist(harness.record, .applied([]))])
    guard case .registerFailed(attempt: 1, let retryAt) = harness.core.phase else {
      Issue.record("phase \(harness.core.phase)")
      return
    }
    #expect(retryAt <= t0.advanced(by: .seconds(1)))
  }

  @Test("unauthorized on register stops the machine, with the reason, until resumed")
  func unauthorized() {
    var harness = CoreHarness()
    _ = harness.core.loaded(nil, now: t0)
    let actions = harness.core.registerFailed(request(1), .api(.unauthorized("Invalid API key")), now: t0)
    #expect(harness.core.phase == .stopped(.unauthorized(message: "Invalid API key"), finger: nil))
    #expect(actions == [.persist(harness.record, .applied([]))])
    #expect(harness.core.nextWakeUp(after: t0) == nil)
    #expect(harness.core.timerFired(now: t0.advanced(by: .seconds(100))) == [])
    #expect(
      harness.core.freshness(now: t0).freshness
        == .cannotConnect(since: t0, reason: "unauthorized: Invalid API key")
    )
  }

  @Test("any other register failure retries forever with backoff")
  func registerRetriesForever() {
    var harness = CoreHarness()
    _ = harness.core.loaded(nil, now: t0)
    var number: UInt64 = 1
    for attempt in 1...50 {
      _ = harness.core.registerFailed(request(number), .serverError(status: 500), now: harness.now)
      guard case .registerFailed(attempt, let retryAt) = harness.core.phase else {
        Issue.record("attempt \(attempt): phase \(harness.core.phase)")
        return
      }
      #expect(retryAt > harness.now && harness.now.duration(to: retryAt) <= .seconds(10))
      harness.now = retryAt
      number += 1
      #expect(
        harness.core.timerFired(now: retryAt) == [
          .register(request(number), eventTypes: nil, lifespan: defaultLifespan, clientID: harness.clientID)
        ]
      )
    }
  }

  @Test("backoff bounds double from 100 ms to a 10 s cap, waits are never zero, and nothing overflows")
  func backoffPolicy() {
    let policy = BackoffPolicy.standard
    let bounds = (1...9).map { policy.bound(attempt: $0) }
    let expected: [Duration] = [100, 200, 400, 800, 1_600, 3_200, 6_400, 10_000, 10_000].map { .milliseconds($0) }
    #expect(bounds == expected)
    #expect(policy.bound(attempt: Int.max) == .seconds(10))
    #expect(policy.bound(attempt: 0) == .milliseconds(100))
    var random = SeededRandomNumberGenerator(seed: 3)
    for attempt in [1, 2, 5, 100, 10_000, Int.max] {
      for _ in 0..<200 {
        let delay = policy.delay(attempt: attempt, using: &random)
        #expect(delay > .zero && delay <= policy.bound(attempt: attempt))
      }
    }
  }

  @Test("backoff resets after a success")
  func backoffResets() {
    var harness = CoreHarness()
    harness.startLive()
    var number: UInt64 = 2
    for _ in 0..<6 {
      _ = harness.core.pollFailed(request(number), .connectionFailed(), now: harness.now)
      guard case .pollFailed(_, _, let retryAt) = harness.core.phase else { return }
      harness.now = retryAt
      _ = harness.core.timerFired(now: retryAt)
      number += 1
    }
    _ = harness.core.pollSucceeded(request(number), [], now: harness.now)
    number += 1
    _ = harness.core.pollFailed(request(number), .connectionFailed(), now: harness.now)
    guard case .pollFailed(_, attempt: 1, let retryAt) = harness.core.phase else {
      Issue.record("phase \(harness.core.phase)")
      return
    }
    #expect(harness.now.duration(to: retryAt) <= .milliseconds(100))
  }

  @Test("the foreground cuts short a wait caused by connection failures, and resets it")
  func foregroundCutsConnectionWait() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.enteredBackground(now: t0)
    _ = harness.core.pushReceived(.init(), now: t0)
    #expect(harness.core.inFlight == .poll(request(3), longPoll: false, deadline: t0.advanced(by: .seconds(30))))
    _ = harness.core.pollFailed(request(3), .connectionFailed(), now: t0)
    _ = harness.core.timerFired(now: t0.advanced(by: .seconds(1)))
    _ = harness.core.pollFailed(request(4), .connectionFailed(), now: t0.advanced(by: .seconds(1)))
    let actions = harness.core.enteredForeground(now: t0.advanced(by: .seconds(1)))
    #expect(actions == [.poll(request(5), finger, dontBlock: true, timeout: .seconds(30))])
    _ = harness.core.pollFailed(request(5), .connectionFailed(), now: t0.advanced(by: .seconds(1)))
    #expect(harness.core.phase.description.contains("#1"))
  }

  @Test("the foreground keeps a wait caused by 5xx or a rate limit")
  func foregroundKeepsServerWait() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.core.enteredBackground(now: t0)
    _ = harness.core.pushReceived(.init(), now: t0)
    _ = harness.core.pollFailed(request(3), .api(.rateLimitHit(retryAfter: .seconds(20))), now: t0)
    let waiting = harness.core.phase
    #expect(harness.core.enteredForeground(now: t0.advanced(by: .seconds(1))) == [])
    #expect(harness.core.phase == waiting)
  }
}

@Suite("UpdateMachine core: queues that keep vanishing")
struct UpdateMachineVanishingQueueTests {
  @Test("a second queue lost before its first poll waits for the slower backoff instead of looping")
  func noRegisterLoop() {
    var harness = CoreHarness()
    harness.startLive()
    let first = harness.core.pollFailed(request(2), .api(.badEventQueueID(queueA)), now: t0)
    #expect(
      first == [
        .persist(harness.record, .applied([])),
        .register(request(3), eventTypes: nil, lifespan: defaultLifespan, clientID: harness.clientID),
      ]
    )
    _ = harness.core.registerSucceeded(request(3), registration(queueB, notes: []), now: t0)
    let second = harness.core.pollFailed(request(4), .api(.badEventQueueID(queueB)), now: t0)
    #expect(second == [.persist(harness.record, .applied([]))])
    guard case .registerFailed(attempt: 1, let retryAt) = harness.core.phase else {
      Issue.record("phase \(harness.core.phase)")
      return
    }
    #expect(retryAt > t0)
  }

  @Test("a queue that worked before may vanish any number of times and is re-registered at once")
  func confirmedQueuesReregisterAtOnce() {
    var harness = CoreHarness()
    harness.startLive()
    var number: UInt64 = 2
    for round in 0..<5 {
      _ = harness.core.pollSucceeded(request(number), [], now: t0)
      number += 1
      let queueID = QueueID(rawValue: "q\(round)")
      let actions = harness.core.pollFailed(request(number), .api(.badEventQueueID(queueID)), now: t0)
      number += 1
      #expect(
        actions.last
          == .register(request(number), eventTypes: nil, lifespan: defaultLifespan, clientID: harness.clientID)
      )
      _ = harness.core.registerSucceeded(request(number), registration(queueID, notes: []), now: t0)
      number += 1
    }
  }
}
