import EventProtocol

/// How the core starts requests and records outcomes: the steps every input ends with.
extension UpdateMachineCore {
  /// Starts whatever the phase calls for when nothing is under way, then the outbox.
  mutating func proceed(now: Timestamp) -> [Action] {
    guard isLoaded else { return [] }
    if case .stopped = phase { return [] }
    var actions: [Action] = []
    if inFlight == nil {
      switch phase {
      case .stale, .registering:
        actions += startRegister(now: now)
      case .registerFailed(_, let retryAt) where retryAt <= now:
        actions += startRegister(now: now)
      case .polling(let finger):
        // Until a poll or register has succeeded since the last disconnection (start-up, a failure, a return
        // from the background), poll without blocking: the answer comes at once and proves the connection.
        actions += startPoll(finger, dontBlock: failure != nil || disconnectedSince != nil, now: now)
      case .pollFailed(let finger, _, let retryAt) where retryAt <= now:
        phase = lifecycle == .foreground ? .polling(finger) : .idle(finger, nextPollAt: nil)
        actions += startPoll(finger, dontBlock: true, now: now)
      case .idle(let finger, let nextPollAt?) where nextPollAt <= now:
        phase = .idle(finger, nextPollAt: nil)
        actions += startPoll(finger, dontBlock: true, now: now)
      default:
        break
      }
    }
    return actions + proceedOutbox(now: now) + proceedFetches(now: now)
  }

  /// Sends a poll, unless the queue must have expired by now: then goes stale and registers instead.
  mutating func startPoll(_ finger: EventFinger, dontBlock: Bool, now: Timestamp) -> [Action] {
    guard let lastContactAt, lastContactAt.duration(to: now) < queueLifetime else {
      phase = .stale
      disconnectedSince = disconnectedSince ?? now
      return [persistAction()] + startRegister(now: now)
    }
    let request = newRequestID()
    let longPoll = lifecycle == .foreground && !dontBlock
    let timeout = longPoll ? longPollTimeout : configuration.shortPollTimeout
    inFlight = .poll(request, longPoll: longPoll, deadline: now.advanced(by: timeout))
    inFlightSentAtNetworkReturns = networkReturns
    metrics.polls += 1
    return [.poll(request, finger, dontBlock: !longPoll, timeout: timeout)]
  }

  mutating func startRegister(now: Timestamp) -> [Action] {
    let request = newRequestID()
    phase = .registering
    inFlight = .register(request, deadline: now.advanced(by: configuration.registerTimeout))
    inFlightSentAtNetworkReturns = networkReturns
    metrics.registers += 1
    return [
      .register(
        request,
        eventTypes: configuration.eventTypes,
        lifespan: configuration.queueLifespan,
        clientID: outbox!.clientID
      )
    ]
  }

  mutating func proceedOutbox(now: Timestamp) -> [Action] {
    guard outbox?.canSend(now: now) == true else { return [] }
    let request = newRequestID()
    let deadline = now.advanced(by: configuration.submitTimeout)
    guard
      let body = outbox!.send(
        request,
        now: now,
        deadline: deadline,
        maximumCount: configuration.maximumMutationsPerRequest,
        onQueue: phase.finger?.queueID
      )
    else { return [] }
    metrics.submits += 1
    outboxSentAtNetworkReturns = networkReturns
    outboxWaitsForNetwork = false
    return [.submit(request, body, queueID: phase.finger?.queueID)]
  }

  /// Cuts short a wait caused by connection failures, in the phase and in the outbox.
  mutating func retryConnectionFailuresNow(now: Timestamp) -> [Action] {
    guard failure?.kind == .connection else { return proceed(now: now) }
    failure?.count = 0
    switch phase {
    case .pollFailed(let finger, _, _): phase = .pollFailed(finger, attempt: 0, retryAt: now)
    case .registerFailed: phase = .registerFailed(attempt: 0, retryAt: now)
    default: break
    }
    outbox?.retryNow()
    retryFetchesNow()
    return proceed(now: now)
  }

  /// After a successful register or poll: take the finger, clear failures, and (in the foreground) connect.
  mutating func markSuccess(finger: EventFinger, now: Timestamp) {
    reachedServerThisSession = true
    if failure != nil || disconnectedSince != nil {
      // Reconnected: the network is back, and a write waiting after failing to connect goes at once.
      networkReturns &+= 1
      if outboxWaitsForNetwork {
        outboxWaitsForNetwork = false
        outbox?.retryNow()
      }
    }
    networkReportedLost = false
    lastContactAt = now
    dataAsOf = now
    failure = nil
    if lifecycle == .foreground {
      phase = .polling(finger)
      disconnectedSince = nil
    } else {
      phase = .idle(finger, nextPollAt: configuration.backgroundPollInterval.map(now.advanced(by:)))
    }
    outbox?.confirm(by: finger)
  }

  /// A malformed answer, another 4xx or a reducer failure: forget the finger (keeping the state on
  /// screen) and re-register after the slower backoff.
  mutating func protocolFailure(_ reason: String, now: Timestamp) -> [Action] {
    protocolFailures += 1
    _ = noteFailure(.protocolError, reason: reason, now: now)
    let retryAt = now.advanced(by: configuration.protocolErrorBackoff.delay(attempt: protocolFailures, using: &random))
    phase = .registerFailed(attempt: protocolFailures, retryAt: retryAt)
    return [persistAction()] + proceed(now: now)
  }

  /// Stops until ``resume(now:)``, cancelling everything under way and keeping the finger.
  mutating func stop(_ reason: StopReason, finger: EventFinger?) -> [Action] {
    var actions: [Action] = []
    if let inFlight { actions.append(.cancel(inFlight.request)) }
    if let request = outbox?.abandonInFlight() { actions.append(.cancel(request)) }
    inFlight = nil
    phase = .stopped(reason, finger: finger ?? phase.finger)
    actions += abandonFetches(.api(.badRequest("the machine stopped: \(reason)")))
    return actions + [persistAction()]
  }

  /// Records a failure and returns the attempt number for backoff.
  mutating func noteFailure(_ kind: FailureKind, reason: String, now: Timestamp) -> Int {
    metrics.failures += 1
    disconnectedSince = disconnectedSince ?? now
    if var failure, failure.kind == kind {
      failure.count += 1
      failure.reason = reason
      self.failure = failure
    } else {
      failure = Failure(kind: kind, count: (failure?.count ?? 0) + 1, since: failure?.since ?? now, reason: reason)
    }
    return failure!.count
  }

  mutating func wait(_ policy: BackoffPolicy, _ attempt: Int, _ retryAfter: Duration?) -> Duration {
    let jittered = policy.delay(attempt: attempt, using: &random)
    if networkReportedLost {
      // Told the network is gone: probe now and then, not at the failure backoff (an hour offline would
      // otherwise cost hundreds of requests into nothing).
      return max(jittered, configuration.offlineProbeInterval ?? Self.never)
    }
    return max(jittered, retryAfter ?? .zero)
  }

  /// Whether a failure of `kind` to a request sent when ``networkReturns`` was `sentAt` is news of the
  /// network as it was: a failure to connect of a request sent before the network last came back.
  func isOutdatedNews(_ kind: FailureKind, sentAt: UInt64) -> Bool {
    kind == .connection && sentAt != networkReturns
  }

  /// A wait that does not end (a century).
  static var never: Duration { .seconds(100 * 365 * 86_400) }

  mutating func newRequestID() -> RequestID {
    defer { nextRequestID += 1 }
    return RequestID(rawValue: nextRequestID)
  }
}
