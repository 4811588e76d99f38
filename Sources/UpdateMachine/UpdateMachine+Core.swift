import EventProtocol

/// The pure, synchronous core of ``UpdateMachine``: phases, the finger, backoff, the outbox and freshness.
///
/// Every input is a `mutating func` named for what happened; it takes `now` and returns the ``Action``s the
/// shell must perform, in order (a `.persist` always comes before the request that depends on it, so a
/// crash between any two actions leaves a consistent file). The core never reads a clock, sleeps or does
/// I/O; randomness (backoff jitter, the client id) comes from the generator it was made with.
///
/// ```swift
/// var core = UpdateMachineCore(reducer: NotesReducer(), random: SeededRandomNumberGenerator(seed: 1))
/// let actions = core.loaded(nil, now: t0)   // [.persist(record), .register(#1, …)]
/// ```
public struct UpdateMachineCore<
  State: Codable & Sendable & Equatable,
  Event: EventPayload,
  Mutation: Codable & Sendable & Equatable
>:
  Sendable
{
  /// The shell's handle on one request, so late answers to cancelled requests are recognised and ignored.
  public struct RequestID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: UInt64
    public static func < (lhs: RequestID, rhs: RequestID) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "#\(rawValue)" }
  }

  /// What the shell must do, in order.
  public enum Action: Equatable, Sendable {
    /// Send a register request.
    case register(RequestID, eventTypes: Set<String>?, lifespan: Duration?)
    /// Send a poll; fail it as a timeout after `timeout`.
    case poll(RequestID, EventFinger, dontBlock: Bool, timeout: Duration)
    /// Send a mutation from the outbox.
    case submit(RequestID, MutationRequest<Mutation>, queueID: QueueID?)
    /// Cancel a request under way; its answer, if any, will be ignored.
    case cancel(RequestID)
    /// Write the record atomically before performing the next action.
    case persist(PersistedRecord<State, Mutation>)
  }

  /// A push notification's hint that something changed.
  public struct PushHint: Hashable, Sendable {
    /// The queue the hint is about, when the server said.
    public var queueID: QueueID?
    /// The server's latest event id for that queue, when the server said.
    public var lastEventID: Int?

    /// Creates a PushHint from its parts.
    public init(queueID: QueueID? = nil, lastEventID: Int? = nil) {
      self.queueID = queueID
      self.lastEventID = lastEventID
    }
  }

  /// Why requests are failing, which decides the backoff and what coming to the foreground does.
  enum FailureKind: Hashable, Sendable {
    case connection
    case server
    case rateLimited
    case protocolError
  }

  struct Failure: Hashable, Sendable {
    var kind: FailureKind
    var count: Int
    var since: Timestamp
    var reason: String
  }

  enum InFlight: Hashable, Sendable {
    case register(RequestID)
    case poll(RequestID, longPoll: Bool)
  }

  private let reducer: any UpdateReducer<State, Event, Mutation>
  /// How the machine registers, retries and reports.
  public let configuration: UpdateMachineConfiguration
  private var random: any RandomNumberGenerator & Sendable

  /// The current phase.
  public private(set) var phase: Phase = .stale
  /// The state as the server confirmed it; `nil` until persisted data is loaded.
  public private(set) var confirmedState: State?
  /// Whether the app is in the foreground.
  public private(set) var lifecycle: AppLifecycle
  /// The outbox, oldest first.
  public private(set) var outbox: [OutboxEntry<Mutation>] = []
  /// Mutations the server refused.
  public private(set) var rejected: [RejectedMutation<Mutation>] = []
  /// Counters.
  public private(set) var metrics = UpdateMetrics()
  /// This installation's id, once loaded.
  public private(set) var clientID: ClientID?

  private var lastContactAt: Timestamp?
  private var dataAsOf: Timestamp?
  private var queueLifetime: Duration
  private var longPollTimeout: Duration
  private var disconnectedSince: Timestamp?
  private(set) var failure: Failure?
  private var protocolFailures = 0
  /// How many queues in a row vanished before a poll on them succeeded.
  private var queuesLostBeforeFirstPoll = 0
  /// Whether a poll has succeeded on the current finger's queue since it was registered.
  private var queueConfirmedByPoll = false
  private(set) var inFlight: InFlight?
  private var submitInFlight: (request: RequestID, mutation: MutationID)?
  private var outboxAttempt = 0
  private var outboxRetryAt: Timestamp?
  private var nextMutationID = MutationID(1)
  private var nextRequestID: UInt64 = 1

  /// Creates a machine whose state is unknown until ``loaded(_:now:)``.
  /// - Parameters:
  ///   - reducer: How events change the state.
  ///   - configuration: Registration, retry and freshness settings.
  ///   - lifecycle: Whether the app starts in the foreground.
  ///   - random: The source of backoff jitter and of a new installation's client id.
  public init(
    reducer: some UpdateReducer<State, Event, Mutation>,
    configuration: UpdateMachineConfiguration = .init(),
    lifecycle: AppLifecycle = .foreground,
    random: some RandomNumberGenerator & Sendable
  ) {
    self.reducer = reducer
    self.configuration = configuration
    self.lifecycle = lifecycle
    self.random = random
    self.queueLifetime = configuration.assumedQueueLifetime
    self.longPollTimeout = configuration.defaultLongPollTimeout
  }

  /// Whether persisted data has been loaded (before that the state is unknown and nothing is sent).
  public var isLoaded: Bool { confirmedState != nil }

  /// The state to show: the confirmed state with every outbox entry's optimistic effect on top.
  public var displayedState: State? {
    guard var state = confirmedState else { return nil }
    for entry in outbox { reducer.applyOptimistically(entry.mutation, to: &state) }
    return state
  }

  // MARK: - Inputs

  /// Persisted data was read (`nil`: none, first start or a file set aside). Resumes with the stored finger
  /// (live in the foreground, a poll now in the background) or stale.
  public mutating func loaded(_ record: PersistedRecord<State, Mutation>?, now: Timestamp) -> [Action] {
    precondition(!isLoaded, "loaded(_:now:) called twice")
    disconnectedSince = now
    var actions: [Action] = []
    if let record {
      clientID = record.clientID
      confirmedState = record.state
      lastContactAt = record.lastContactAt
      dataAsOf = record.dataAsOf
      queueLifetime = record.queueLifetime
      longPollTimeout = record.longPollTimeout
      outbox = record.outbox
      rejected = record.rejected
      nextMutationID = record.nextMutationID
      if let finger = record.finger {
        phase = lifecycle == .foreground ? .live(finger) : .idle(finger, nextPollAt: now)
        queueConfirmedByPoll = true
      }
    } else {
      clientID = .random(using: &random)
      confirmedState = reducer.initialState
      actions.append(.persist(persistedRecord()))
    }
    return actions + proceed(now: now)
  }

  /// A register request succeeded: the snapshot replaces the state and the finger is taken.
  public mutating func registerSucceeded(
    _ request: RequestID,
    _ registration: Registration<State>,
    now: Timestamp
  ) -> [Action] {
    guard inFlight == .register(request) else { return [] }
    inFlight = nil
    confirmedState = registration.snapshot
    queueLifetime = configuration.assumedQueueLifetime
    longPollTimeout = registration.longPollTimeout ?? configuration.defaultLongPollTimeout
    queueConfirmedByPoll = false
    markSuccess(finger: registration.finger, now: now)
    return [.persist(persistedRecord())] + proceed(now: now)
  }

  /// A register request failed. Unauthorized stops the machine; anything else is retried after backoff.
  public mutating func registerFailed(_ request: RequestID, _ error: TransportError, now: Timestamp) -> [Action] {
    guard inFlight == .register(request) else { return [] }
    inFlight = nil
    if case .api(let apiError) = error.kind, apiError.code == .unauthorized {
      return terminate(reason: apiError.message)
    }
    let (kind, retryAfter) = classify(error)
    let policy = kind == .protocolError ? configuration.protocolErrorBackoff : configuration.backoff
    let attempt = noteFailure(kind, reason: error.description, now: now)
    phase = .registerFailed(attempt: attempt, retryAt: now.advanced(by: wait(policy, attempt, retryAfter)))
    return proceed(now: now)
  }

  /// A poll answered with events: apply them in id order, advance the finger, persist, poll again.
  ///
  /// Events at or below the finger are skipped (already applied). Ids must strictly increase within the
  /// batch (gaps are fine); otherwise, or if the reducer throws, the whole batch is dropped and the machine
  /// re-registers after the protocol-error backoff, so no event is ever skipped.
  public mutating func pollSucceeded(_ request: RequestID, _ events: [EventEnvelope<Event>], now: Timestamp) -> [Action]
  {
    guard case .poll(request, _) = inFlight, let finger = phase.finger else { return [] }
    inFlight = nil
    var state = confirmedState!
    var lastEventID = finger.lastEventID
    var previousID: Int?
    var applied = 0
    for event in events {
      if let previousID, event.id <= previousID {
        return protocolFailure("event id \(event.id) after \(previousID) in one batch", now: now)
      }
      previousID = event.id
      guard event.id > finger.lastEventID else { continue }
      if case .payload(let payload) = event.body {
        do {
          try reducer.apply(payload, to: &state)
        } catch {
          return protocolFailure(error.description, now: now)
        }
        applied += 1
      }
      lastEventID = event.id
    }
    confirmedState = state
    metrics.eventsApplied += applied
    if applied > 0 { protocolFailures = 0 }
    queueConfirmedByPoll = true
    queuesLostBeforeFirstPoll = 0
    markSuccess(finger: EventFinger(queueID: finger.queueID, lastEventID: lastEventID), now: now)
    return [.persist(persistedRecord())] + proceed(now: now)
  }

  /// A poll failed. An expired queue re-registers at once; a connection failure, timeout, 5xx or rate limit
  /// retries the same finger after backoff; anything else re-registers after the slower backoff.
  public mutating func pollFailed(_ request: RequestID, _ error: TransportError, now: Timestamp) -> [Action] {
    guard case .poll(request, _) = inFlight, let finger = phase.finger else { return [] }
    inFlight = nil
    if case .api(let apiError) = error.kind, apiError.code == .badEventQueueID {
      // Queues that keep vanishing before their first poll succeeds would loop register, poll, register
      // with no pause: the second such loss in a row is treated as a protocol error, with its backoff.
      if !queueConfirmedByPoll {
        queuesLostBeforeFirstPoll += 1
        if queuesLostBeforeFirstPoll >= 2 {
          return protocolFailure("queue \(finger.queueID) vanished before its first poll", now: now)
        }
      }
      phase = .stale
      disconnectedSince = disconnectedSince ?? now
      return [.persist(persistedRecord())] + proceed(now: now)
    }
    let (kind, retryAfter) = classify(error)
    if kind == .protocolError { return protocolFailure(error.description, now: now) }
    let attempt = noteFailure(kind, reason: error.description, now: now)
    phase = .pollFailed(
      finger,
      attempt: attempt,
      retryAt: now.advanced(by: wait(configuration.backoff, attempt, retryAfter))
    )
    return proceed(now: now)
  }

  /// The server acknowledged the mutation in flight; it stays (for its optimistic effect) until the finger
  /// shows its event.
  public mutating func submitSucceeded(_ request: RequestID, _ receipt: MutationReceipt, now: Timestamp) -> [Action] {
    guard let inFlight = submitInFlight, inFlight.request == request else { return [] }
    submitInFlight = nil
    outboxAttempt = 0
    outboxRetryAt = nil
    if let index = outbox.firstIndex(where: { $0.id == inFlight.mutation }) { outbox[index].receipt = receipt }
    confirmOutbox()
    return [.persist(persistedRecord())] + proceed(now: now)
  }

  /// Sending the mutation in flight failed: refused ones are dropped and reported, others retried.
  public mutating func submitFailed(_ request: RequestID, _ error: TransportError, now: Timestamp) -> [Action] {
    guard let inFlight = submitInFlight, inFlight.request == request else { return [] }
    submitInFlight = nil
    if case .api(let apiError) = error.kind {
      if apiError.code == .unauthorized { return terminate(reason: apiError.message) }
      if apiError.code == .badRequest, let index = outbox.firstIndex(where: { $0.id == inFlight.mutation }) {
        let entry = outbox.remove(at: index)
        rejected.append(RejectedMutation(id: entry.id, mutation: entry.mutation, reason: apiError.message))
        outboxAttempt = 0
        outboxRetryAt = nil
        return [.persist(persistedRecord())] + proceed(now: now)
      }
    }
    metrics.failures += 1
    outboxAttempt += 1
    let retryAfter = classify(error).retryAfter
    outboxRetryAt = now.advanced(by: wait(configuration.outboxBackoff, outboxAttempt, retryAfter))
    return proceed(now: now)
  }

  /// The app submits a mutation: it is persisted before it is first sent.
  /// - Returns: The mutation's id and the actions.
  public mutating func submit(_ mutation: Mutation, now: Timestamp) -> (MutationID, [Action]) {
    precondition(isLoaded, "submit before the persisted data was loaded")
    let id = nextMutationID
    nextMutationID = MutationID(id.rawValue + 1)
    outbox.append(OutboxEntry(id: id, mutation: mutation, submittedAt: now, attempts: 0, receipt: nil))
    return (id, [.persist(persistedRecord())] + proceed(now: now))
  }

  /// The app has shown the refused mutations up to `id` to the user: forget them.
  public mutating func rejectionsDismissed(through id: MutationID, now: Timestamp) -> [Action] {
    let before = rejected.count
    rejected.removeAll { $0.id <= id }
    return rejected.count == before ? [] : [.persist(persistedRecord())]
  }

  /// A timer the shell set for ``nextWakeUp(after:)`` went off.
  public mutating func timerFired(now: Timestamp) -> [Action] {
    proceed(now: now)
  }

  /// The app went to the background: the long-poll stops; the machine polls every background interval.
  public mutating func enteredBackground(now: Timestamp) -> [Action] {
    guard lifecycle == .foreground else { return [] }
    lifecycle = .background
    disconnectedSince = disconnectedSince ?? now
    var actions: [Action] = []
    if case .live(let finger) = phase {
      if case .poll(let request, _) = inFlight {
        actions.append(.cancel(request))
        inFlight = nil
      }
      phase = .idle(finger, nextPollAt: configuration.backgroundPollInterval.map(now.advanced(by:)))
    }
    return actions + proceed(now: now)
  }

  /// The app came to the foreground: long-poll again at once. A wait caused by connection failures is cut
  /// short and its backoff reset; a wait caused by 5xx or a rate limit is kept.
  public mutating func enteredForeground(now: Timestamp) -> [Action] {
    guard lifecycle == .background else { return [] }
    lifecycle = .foreground
    let connectionTrouble = failure?.kind == .connection
    if connectionTrouble { failure?.count = 0 }
    switch phase {
    case .idle(let finger, _):
      phase = .live(finger)
    case .pollFailed(let finger, _, _) where connectionTrouble:
      phase = .pollFailed(finger, attempt: 0, retryAt: now)
    case .registerFailed(_, _) where connectionTrouble:
      phase = .registerFailed(attempt: 0, retryAt: now)
    default:
      break
    }
    return proceed(now: now)
  }

  /// A push notification hinted that something changed. A hint naming an event already applied does
  /// nothing; otherwise the machine polls at once without blocking (or registers, or retries, now).
  public mutating func pushReceived(_ hint: PushHint, now: Timestamp) -> [Action] {
    metrics.pushHints += 1
    if let eventID = hint.lastEventID, let finger = phase.finger,
      hint.queueID == nil || hint.queueID == finger.queueID, eventID <= finger.lastEventID
    {
      metrics.pushHintsLate += 1
      return []
    }
    switch phase {
    case .live(let finger):
      switch inFlight {
      case .poll(let request, longPoll: true):
        inFlight = nil
        return [.cancel(request)] + startPoll(finger, dontBlock: true, now: now)
      case .poll, .register:
        metrics.pushHintsRedundant += 1
        return []
      case nil:
        return proceed(now: now)
      }
    case .idle(let finger, _):
      guard inFlight == nil else {
        metrics.pushHintsRedundant += 1
        return []
      }
      phase = .idle(finger, nextPollAt: now)
    case .pollFailed(let finger, let attempt, _):
      phase = .pollFailed(finger, attempt: attempt, retryAt: now)
    case .registerFailed(let attempt, _):
      phase = .registerFailed(attempt: attempt, retryAt: now)
    case .registering:
      metrics.pushHintsRedundant += 1
      return []
    case .stale, .terminated:
      break
    }
    return proceed(now: now)
  }

  // MARK: - Derived

  /// Freshness for the UI at `now`.
  public func freshness(now: Timestamp) -> FreshnessReport {
    if case .terminated(let reason) = phase {
      return FreshnessReport(
        freshness: .cannotConnect(since: failure?.since ?? disconnectedSince ?? now, reason: reason),
        dataAsOf: dataAsOf
      )
    }
    if case .live = phase, disconnectedSince == nil, failure == nil {
      return FreshnessReport(freshness: .live, dataAsOf: now)
    }
    let since = disconnectedSince ?? now
    if let failure, failure.count >= configuration.failuresBeforeCannotConnect {
      return FreshnessReport(
        freshness: .cannotConnect(since: failure.since, reason: failure.reason),
        dataAsOf: dataAsOf
      )
    }
    if since.duration(to: now) < configuration.freshnessDebounce {
      return FreshnessReport(freshness: .settling, dataAsOf: dataAsOf)
    }
    return FreshnessReport(freshness: .connecting(since: since), dataAsOf: dataAsOf)
  }

  /// The next time after `now` at which ``timerFired(now:)`` has work (a retry, a background poll, an outbox
  /// retry, the end of the freshness debounce), or `nil`.
  public func nextWakeUp(after now: Timestamp) -> Timestamp? {
    guard isLoaded else { return nil }
    if case .terminated = phase { return nil }
    var times: [Timestamp] = []
    if inFlight == nil {
      switch phase {
      case .registerFailed(_, let retryAt), .pollFailed(_, _, let retryAt): times.append(retryAt)
      case .idle(_, let nextPollAt?): times.append(nextPollAt)
      default: break
      }
    }
    if submitInFlight == nil, outbox.contains(where: { !$0.isAcknowledged }), let outboxRetryAt {
      times.append(outboxRetryAt)
    }
    if let disconnectedSince { times.append(disconnectedSince.advanced(by: configuration.freshnessDebounce)) }
    return times.filter { $0 > now }.min()
  }

  /// The record to persist now.
  public func persistedRecord() -> PersistedRecord<State, Mutation> {
    PersistedRecord(
      clientID: clientID!,
      state: confirmedState!,
      finger: phase.finger,
      lastContactAt: lastContactAt,
      dataAsOf: dataAsOf,
      queueLifetime: queueLifetime,
      longPollTimeout: longPollTimeout,
      outbox: outbox,
      rejected: rejected,
      nextMutationID: nextMutationID
    )
  }

  // MARK: - Helpers

  /// Starts whatever the phase calls for when nothing is under way, then the outbox.
  private mutating func proceed(now: Timestamp) -> [Action] {
    guard isLoaded else { return [] }
    if case .terminated = phase { return [] }
    var actions: [Action] = []
    if inFlight == nil {
      switch phase {
      case .stale, .registering:
        actions += startRegister(now: now)
      case .registerFailed(_, let retryAt) where retryAt <= now:
        actions += startRegister(now: now)
      case .live(let finger):
        // Until a poll or register has succeeded since the last disconnection (start-up, a failure, a return
        // from the background), poll without blocking: the answer comes at once and proves the connection.
        actions += startPoll(finger, dontBlock: failure != nil || disconnectedSince != nil, now: now)
      case .pollFailed(let finger, _, let retryAt) where retryAt <= now:
        phase = lifecycle == .foreground ? .live(finger) : .idle(finger, nextPollAt: nil)
        actions += startPoll(finger, dontBlock: true, now: now)
      case .idle(let finger, let nextPollAt?) where nextPollAt <= now:
        phase = .idle(finger, nextPollAt: nil)
        actions += startPoll(finger, dontBlock: true, now: now)
      default:
        break
      }
    }
    return actions + proceedOutbox(now: now)
  }

  /// Sends a poll, unless the queue must have expired by now: then goes stale and registers instead.
  private mutating func startPoll(_ finger: EventFinger, dontBlock: Bool, now: Timestamp) -> [Action] {
    guard let lastContactAt, lastContactAt.duration(to: now) < queueLifetime else {
      phase = .stale
      disconnectedSince = disconnectedSince ?? now
      return [.persist(persistedRecord())] + startRegister(now: now)
    }
    let request = newRequestID()
    let longPoll = lifecycle == .foreground && !dontBlock
    inFlight = .poll(request, longPoll: longPoll)
    metrics.polls += 1
    return [.poll(request, finger, dontBlock: !longPoll, timeout: longPollTimeout)]
  }

  private mutating func startRegister(now: Timestamp) -> [Action] {
    let request = newRequestID()
    phase = .registering
    inFlight = .register(request)
    metrics.registers += 1
    return [.register(request, eventTypes: configuration.eventTypes, lifespan: configuration.queueLifespan)]
  }

  private mutating func proceedOutbox(now: Timestamp) -> [Action] {
    guard submitInFlight == nil, let index = outbox.firstIndex(where: { !$0.isAcknowledged }) else { return [] }
    if let outboxRetryAt, outboxRetryAt > now { return [] }
    outbox[index].attempts += 1
    let request = newRequestID()
    submitInFlight = (request, outbox[index].id)
    metrics.submits += 1
    let body = MutationRequest(clientID: clientID!, mutationID: outbox[index].id, mutation: outbox[index].mutation)
    return [.submit(request, body, queueID: phase.finger?.queueID)]
  }

  /// After a successful register or poll: take the finger, clear failures, and (in the foreground) connect.
  private mutating func markSuccess(finger: EventFinger, now: Timestamp) {
    lastContactAt = now
    dataAsOf = now
    failure = nil
    if lifecycle == .foreground {
      phase = .live(finger)
      disconnectedSince = nil
    } else {
      phase = .idle(finger, nextPollAt: configuration.backgroundPollInterval.map(now.advanced(by:)))
    }
    confirmOutbox()
  }

  /// Drops acknowledged mutations whose effect the finger shows.
  private mutating func confirmOutbox() {
    guard let finger = phase.finger else { return }
    outbox.removeAll { $0.receipt?.isReflected(by: finger) == true }
  }

  /// A malformed answer, another 4xx or a reducer failure: forget the finger (keeping the state on
  /// screen) and re-register after the slower backoff.
  private mutating func protocolFailure(_ reason: String, now: Timestamp) -> [Action] {
    protocolFailures += 1
    _ = noteFailure(.protocolError, reason: reason, now: now)
    let retryAt = now.advanced(by: configuration.protocolErrorBackoff.delay(attempt: protocolFailures, using: &random))
    phase = .registerFailed(attempt: protocolFailures, retryAt: retryAt)
    return [.persist(persistedRecord())] + proceed(now: now)
  }

  private mutating func terminate(reason: String) -> [Action] {
    var actions: [Action] = []
    switch inFlight {
    case .register(let request), .poll(let request, _): actions.append(.cancel(request))
    case nil: break
    }
    if let submitInFlight { actions.append(.cancel(submitInFlight.request)) }
    inFlight = nil
    submitInFlight = nil
    phase = .terminated(reason: reason)
    return actions
  }

  /// Records a failure and returns the attempt number for backoff.
  private mutating func noteFailure(_ kind: FailureKind, reason: String, now: Timestamp) -> Int {
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

  private func classify(_ error: TransportError) -> (kind: FailureKind, retryAfter: Duration?) {
    switch error.kind {
    case .connectionFailed, .timedOut, .cancelled: (.connection, nil)
    case .serverError: (.server, nil)
    case .api(let apiError) where apiError.code == .rateLimitHit: (.rateLimited, apiError.retryAfter)
    case .api: (.protocolError, nil)
    }
  }

  private mutating func wait(_ policy: BackoffPolicy, _ attempt: Int, _ retryAfter: Duration?) -> Duration {
    let jittered = policy.delay(attempt: attempt, using: &random)
    return max(jittered, retryAfter ?? .zero)
  }

  private mutating func newRequestID() -> RequestID {
    defer { nextRequestID += 1 }
    return RequestID(rawValue: nextRequestID)
  }
}
