import EventProtocol

/// The pure, synchronous core of ``UpdateMachine``: phases, the finger, request deadlines, backoff,
/// persistence results and freshness, composed with the ``Outbox`` machine.
///
/// Every input is a `mutating func` named for what happened; it takes `now` and returns the ``Action``s the
/// shell must perform, in order. A `.persist` is answered by ``persistSucceeded(_:now:)`` or
/// ``persistFailed(_:now:)``: a write is sent only after a save holding it succeeded. Every request has a
/// deadline the core keeps itself (``nextWakeUp(after:)`` includes it; ``timerFired(now:)`` past it cancels
/// the request and counts a timeout). The core never reads a clock, sleeps or does I/O; randomness
/// (backoff jitter, client ids) comes from the generator it was made with.
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
  /// What the shell must do, in order.
  public enum Action: Equatable, Sendable {
    /// Send a register request.
    case register(RequestID, eventTypes: Set<String>?, lifespan: Duration?)
    /// Send a poll; the core times it out itself after `timeout` (a transport may use it as its own).
    case poll(RequestID, EventFinger, dontBlock: Bool, timeout: Duration)
    /// Send a mutation from the outbox.
    case submit(RequestID, MutationRequest<Mutation>, queueID: QueueID?)
    /// Cancel a request under way; its answer, if any, will be ignored.
    case cancel(RequestID)
    /// Write the record atomically, then report the result before performing the next action.
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

  struct Failure: Hashable, Sendable {
    var kind: FailureKind
    var count: Int
    var since: Timestamp
    var reason: String
  }

  /// The register or poll under way, with its deadline.
  enum InFlight: Hashable, Sendable {
    case register(RequestID, deadline: Timestamp)
    case poll(RequestID, longPoll: Bool, deadline: Timestamp)

    var request: RequestID {
      switch self {
      case .register(let request, _), .poll(let request, _, _): request
      }
    }

    var deadline: Timestamp {
      switch self {
      case .register(_, let deadline), .poll(_, _, let deadline): deadline
      }
    }
  }

  /// Where saving stands.
  enum Saving: Hashable, Sendable {
    /// The last save succeeded (or none was needed yet).
    case saved
    /// Saves are failing; the first failure is kept as the issue, and the next try is at `retryAt`.
    case failing(PersistenceError, failures: Int, retryAt: Timestamp)
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
  /// The outbox; `nil` until persisted data is loaded.
  public private(set) var outbox: Outbox<Mutation>?
  /// Counters.
  public private(set) var metrics = UpdateMetrics()
  /// What reading the persisted record had to do (set aside, migrated, discarded), if anything.
  public private(set) var storeRecovery: [StoreRecovery] = []

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
  private(set) var saving: Saving = .saved
  private var nextRequestID: UInt64 = 1

  /// Creates a machine whose state is unknown until ``loaded(_:recovery:now:)``.
  ///
  /// A configuration with ``UpdateMachineConfiguration/problems`` is a programming error and traps with
  /// their description.
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
    do {
      try configuration.validate()
    } catch {
      preconditionFailure(error.description)
    }
    self.reducer = reducer
    self.configuration = configuration
    self.lifecycle = lifecycle
    self.random = random
    self.queueLifetime = configuration.assumedQueueLifetime
    self.longPollTimeout = configuration.defaultLongPollTimeout.clamped(to: configuration.longPollTimeoutRange)
  }

  /// Whether persisted data has been loaded (before that the state is unknown and nothing is sent).
  public var isLoaded: Bool { confirmedState != nil }

  /// This installation's id, once loaded.
  public var clientID: ClientID? { outbox?.clientID }

  /// The writes not yet confirmed, oldest first.
  public var pendingMutations: [OutboxEntry<Mutation>] { outbox?.entries ?? [] }

  /// The writes the server refused, until dismissed.
  public var rejected: [RejectedMutation<Mutation>] { outbox?.rejected ?? [] }

  /// The current save failure, if saves are failing; cleared by the next successful save.
  public var persistenceIssue: PersistenceError? {
    if case .failing(let error, _, _) = saving { error } else { nil }
  }

  /// The state to show: the confirmed state with every outbox entry's optimistic effect on top.
  public var displayedState: State? {
    guard var state = confirmedState else { return nil }
    for entry in pendingMutations { reducer.applyOptimistically(entry.mutation, to: &state) }
    return state
  }

  // MARK: - Inputs: loading and saving

  /// Persisted data was read (`nil`: none, first start, or nothing usable). Resumes with the stored finger
  /// (polling in the foreground, a poll now in the background) or registers.
  /// - Parameter recovery: What reading the record had to do, for the snapshot.
  public mutating func loaded(
    _ record: PersistedRecord<State, Mutation>?,
    recovery: [StoreRecovery] = [],
    now: Timestamp
  ) -> [Action] {
    precondition(!isLoaded, "loaded(_:recovery:now:) called twice")
    disconnectedSince = now
    storeRecovery = recovery
    var actions: [Action] = []
    if let record {
      confirmedState = record.state
      lastContactAt = record.lastContactAt
      dataAsOf = record.dataAsOf
      queueLifetime = record.queueLifetime
      longPollTimeout = record.longPollTimeout.clamped(to: configuration.longPollTimeoutRange)
      outbox = Outbox(
        clientID: record.clientID,
        entries: record.outbox,
        rejected: record.rejected,
        nextMutationID: record.nextMutationID
      )
      if let finger = record.finger {
        phase = lifecycle == .foreground ? .polling(finger) : .idle(finger, nextPollAt: now)
        queueConfirmedByPoll = true
      }
      if !recovery.isEmpty { actions.append(.persist(persistedRecord())) }
    } else {
      outbox = Outbox(clientID: .random(using: &random))
      confirmedState = reducer.initialState
      actions.append(.persist(persistedRecord()))
    }
    return actions + proceed(now: now)
  }

  /// The shell saved `record`: the writes it holds may now be sent, and any save issue is cleared.
  public mutating func persistSucceeded(_ record: PersistedRecord<State, Mutation>, now: Timestamp) -> [Action] {
    outbox?.saved(clientID: record.clientID, nextMutationID: record.nextMutationID)
    saving = .saved
    return proceed(now: now)
  }

  /// Saving failed; the old file is intact. Writes not yet saved are not sent; the save is retried after
  /// the outbox backoff. The first error is kept as ``persistenceIssue`` until a save succeeds.
  public mutating func persistFailed(_ error: PersistenceError, now: Timestamp) -> [Action] {
    let (first, failures): (PersistenceError, Int) =
      switch saving {
      case .saved: (error, 1)
      case .failing(let first, let failures, _): (first, failures + 1)
      }
    let retryAt = now.advanced(by: configuration.outboxBackoff.delay(attempt: failures, using: &random))
    saving = .failing(first, failures: failures, retryAt: retryAt)
    return []
  }

  // MARK: - Inputs: answers

  /// A register request succeeded: the snapshot replaces the state and the finger is taken.
  public mutating func registerSucceeded(
    _ request: RequestID,
    _ registration: Registration<State>,
    now: Timestamp
  ) -> [Action] {
    guard case .register(request, _) = inFlight else { return [] }
    inFlight = nil
    confirmedState = registration.snapshot
    queueLifetime = configuration.assumedQueueLifetime
    longPollTimeout = (registration.longPollTimeout ?? configuration.defaultLongPollTimeout)
      .clamped(to: configuration.longPollTimeoutRange)
    queueConfirmedByPoll = false
    markSuccess(finger: registration.finger, now: now)
    return [.persist(persistedRecord())] + proceed(now: now)
  }

  /// A register request failed. Unauthorized stops the machine; anything else is retried after backoff.
  public mutating func registerFailed(_ request: RequestID, _ error: TransportError, now: Timestamp) -> [Action] {
    guard case .register(request, _) = inFlight else { return [] }
    inFlight = nil
    if case .api(let apiError) = error.kind, apiError.code == .unauthorized {
      return stop(.unauthorized(message: apiError.message), finger: nil)
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
  /// re-registers after the protocol-error backoff, so no event is ever skipped. An applied event whose
  /// origin is one of this client's writes retires that write from the outbox at once.
  public mutating func pollSucceeded(_ request: RequestID, _ events: [EventEnvelope<Event>], now: Timestamp) -> [Action]
  {
    guard case .poll(request, _, _) = inFlight, let finger = phase.finger else { return [] }
    inFlight = nil
    var state = confirmedState!
    var lastEventID = finger.lastEventID
    var previousID: Int?
    var applied = 0
    var origins: [MutationOrigin] = []
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
      if let origin = event.origin { origins.append(origin) }
      lastEventID = event.id
    }
    confirmedState = state
    metrics.eventsApplied += applied
    if !origins.isEmpty { outbox?.eventsApplied(origins) }
    if applied > 0 { protocolFailures = 0 }
    queueConfirmedByPoll = true
    queuesLostBeforeFirstPoll = 0
    markSuccess(finger: EventFinger(queueID: finger.queueID, lastEventID: lastEventID), now: now)
    return [.persist(persistedRecord())] + proceed(now: now)
  }

  /// A poll failed. An expired queue re-registers at once; a connection failure, timeout, 5xx or rate limit
  /// retries the same finger after backoff; unauthorized stops; anything else re-registers after the
  /// slower backoff.
  public mutating func pollFailed(_ request: RequestID, _ error: TransportError, now: Timestamp) -> [Action] {
    guard case .poll(request, _, _) = inFlight, let finger = phase.finger else { return [] }
    inFlight = nil
    if case .api(let apiError) = error.kind {
      if apiError.code == .unauthorized { return stop(.unauthorized(message: apiError.message), finger: finger) }
      if apiError.code == .badEventQueueID {
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

  /// The server acknowledged the write in flight; it stays (for its optimistic effect) until the events
  /// show it.
  public mutating func submitSucceeded(_ request: RequestID, _ receipt: MutationReceipt, now: Timestamp) -> [Action] {
    guard outbox?.acknowledged(request, receipt) == true else { return [] }
    if let finger = phase.finger { outbox?.confirm(by: finger) }
    return [.persist(persistedRecord())] + proceed(now: now)
  }

  /// Sending the write in flight failed: refused ones are dropped and reported, a reused id makes the
  /// outbox take a new client id and send again, unauthorized stops the machine, others are retried.
  public mutating func submitFailed(_ request: RequestID, _ error: TransportError, now: Timestamp) -> [Action] {
    guard outbox?.requestInFlight == request else { return [] }
    if case .api(let apiError) = error.kind, apiError.code == .unauthorized {
      return stop(.unauthorized(message: apiError.message), finger: phase.finger)
    }
    let attempt = (outbox?.consecutiveFailures ?? 0) + 1
    let delay = wait(configuration.outboxBackoff, attempt, classify(error).retryAfter)
    switch outbox!.failed(request, error, wait: delay, now: now) {
    case .ignored:
      return []
    case .rejected:
      return [.persist(persistedRecord())] + proceed(now: now)
    case .needsNewClientID:
      outbox!.adoptClientID(.random(using: &random))
      metrics.clientIDResets += 1
      return [.persist(persistedRecord())] + proceed(now: now)
    case .willRetry:
      metrics.failures += 1
      return proceed(now: now)
    }
  }

  // MARK: - Inputs: the app

  /// The app submits a mutation. It shows at once (optimistically) and is sent once a save holding it
  /// succeeds.
  /// - Returns: The mutation's id and the actions.
  public mutating func submit(_ mutation: Mutation, now: Timestamp) -> (MutationID, [Action]) {
    precondition(isLoaded, "submit before the persisted data was loaded")
    let id = outbox!.append(mutation, now: now)
    return (id, [.persist(persistedRecord())] + proceed(now: now))
  }

  /// The app has shown the refused mutations up to `id` to the user: forget them.
  public mutating func rejectionsDismissed(through id: MutationID, now: Timestamp) -> [Action] {
    outbox?.dismissRejections(through: id) == true ? [.persist(persistedRecord())] : []
  }

  /// A timer the shell set for ``nextWakeUp(after:)`` went off: retries, background polls, a save retry,
  /// and requests whose deadline passed (cancelled and counted as timeouts).
  public mutating func timerFired(now: Timestamp) -> [Action] {
    guard isLoaded else { return [] }
    var actions: [Action] = []
    if case .failing(_, _, let retryAt) = saving, retryAt <= now { actions.append(.persist(persistedRecord())) }
    if let inFlight, inFlight.deadline <= now {
      actions.append(.cancel(inFlight.request))
      switch inFlight {
      case .register(let request, _): actions += registerFailed(request, .timedOut, now: now)
      case .poll(let request, _, _): actions += pollFailed(request, .timedOut, now: now)
      }
    }
    if let request = outbox?.timedOutRequest(now: now) {
      actions.append(.cancel(request))
      actions += submitFailed(request, .timedOut, now: now)
    }
    return actions + proceed(now: now)
  }

  /// The app went to the background: the long-poll stops; the machine polls every background interval.
  public mutating func enteredBackground(now: Timestamp) -> [Action] {
    guard lifecycle == .foreground else { return [] }
    lifecycle = .background
    disconnectedSince = disconnectedSince ?? now
    var actions: [Action] = []
    if case .polling(let finger) = phase {
      if case .poll(let request, _, _) = inFlight {
        actions.append(.cancel(request))
        inFlight = nil
      }
      phase = .idle(finger, nextPollAt: configuration.backgroundPollInterval.map(now.advanced(by:)))
    }
    return actions + proceed(now: now)
  }

  /// The app came to the foreground: poll again at once. A wait caused by connection failures is cut short
  /// and its backoff reset; a wait caused by 5xx or a rate limit is kept.
  public mutating func enteredForeground(now: Timestamp) -> [Action] {
    guard lifecycle == .background else { return [] }
    lifecycle = .foreground
    if case .idle(let finger, _) = phase { phase = .polling(finger) }
    return retryConnectionFailuresNow(now: now)
  }

  /// The platform reports a usable network path again: like coming to the foreground for connection
  /// failures, the wait is cut short and the backoff reset (the outbox's too).
  public mutating func networkBecameAvailable(now: Timestamp) -> [Action] {
    retryConnectionFailuresNow(now: now)
  }

  /// The platform reports that the network is gone: the register or poll under way is cancelled and
  /// counted as a connection failure at once (instead of waiting for its deadline), so freshness says so;
  /// retries continue with backoff in case the report was wrong.
  public mutating func networkLost(now: Timestamp) -> [Action] {
    guard isLoaded else { return [] }
    var actions: [Action] = []
    let lost = TransportError.connectionFailed("network lost")
    switch inFlight {
    case .register(let request, _): actions += [.cancel(request)] + registerFailed(request, lost, now: now)
    case .poll(let request, _, _): actions += [.cancel(request)] + pollFailed(request, lost, now: now)
    case nil: disconnectedSince = disconnectedSince ?? now
    }
    if let request = outbox?.requestInFlight {
      actions += [.cancel(request)] + submitFailed(request, lost, now: now)
    }
    return actions
  }

  /// After ``Phase/stopped(_:finger:)``: the app refreshed the credentials; start again with the kept state,
  /// finger and outbox.
  public mutating func resume(now: Timestamp) -> [Action] {
    guard case .stopped(_, let finger) = phase else { return [] }
    failure = nil
    disconnectedSince = disconnectedSince ?? now
    if let finger {
      phase = lifecycle == .foreground ? .polling(finger) : .idle(finger, nextPollAt: now)
    } else {
      phase = .stale
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
    case .polling(let finger):
      switch inFlight {
      case .poll(let request, longPoll: true, _):
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
    case .stale, .stopped:
      break
    }
    return proceed(now: now)
  }

  // MARK: - Derived

  /// Freshness for the UI at `now`. ``Freshness/live`` only when the server has answered since the last
  /// disconnection.
  public func freshness(now: Timestamp) -> FreshnessReport {
    if case .stopped(let reason, _) = phase {
      return FreshnessReport(
        freshness: .cannotConnect(since: failure?.since ?? disconnectedSince ?? now, reason: reason.description),
        dataAsOf: dataAsOf
      )
    }
    if case .polling = phase, disconnectedSince == nil, failure == nil {
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

  /// The next time after `now` at which ``timerFired(now:)`` has work (a retry, a background poll, a
  /// request deadline, an outbox retry, a save retry, the end of the freshness debounce), or `nil`.
  public func nextWakeUp(after now: Timestamp) -> Timestamp? {
    guard isLoaded else { return nil }
    if case .stopped = phase { return nil }
    var times: [Timestamp] = []
    if let inFlight {
      times.append(inFlight.deadline)
    } else {
      switch phase {
      case .registerFailed(_, let retryAt), .pollFailed(_, _, let retryAt): times.append(retryAt)
      case .idle(_, let nextPollAt?): times.append(nextPollAt)
      default: break
      }
    }
    if let outboxTime = outbox?.nextWakeUp { times.append(outboxTime) }
    if case .failing(_, _, let retryAt) = saving { times.append(retryAt) }
    if let disconnectedSince { times.append(disconnectedSince.advanced(by: configuration.freshnessDebounce)) }
    return times.filter { $0 > now }.min()
  }

  /// The record to persist now.
  public func persistedRecord() -> PersistedRecord<State, Mutation> {
    PersistedRecord(
      clientID: outbox!.clientID,
      stateVersion: reducer.stateVersion,
      state: confirmedState!,
      finger: phase.heldFinger,
      lastContactAt: lastContactAt,
      dataAsOf: dataAsOf,
      queueLifetime: queueLifetime,
      longPollTimeout: longPollTimeout,
      outbox: outbox!.entries,
      rejected: outbox!.rejected,
      nextMutationID: outbox!.nextMutationID
    )
  }

  /// How a transport error counts: its failure kind and the server's `retry-after`, clamped to
  /// ``UpdateMachineConfiguration/maximumRetryAfter``.
  public func classify(_ error: TransportError) -> (kind: FailureKind, retryAfter: Duration?) {
    switch error.kind {
    case .connectionFailed, .timedOut, .cancelled: (.connection, nil)
    case .serverError: (.server, nil)
    case .api(let apiError) where apiError.code == .rateLimitHit:
      (.rateLimited, apiError.retryAfter.map { $0.clamped(to: .zero...configuration.maximumRetryAfter) })
    case .api: (.protocolError, nil)
    }
  }

  // MARK: - Helpers

  /// Starts whatever the phase calls for when nothing is under way, then the outbox.
  private mutating func proceed(now: Timestamp) -> [Action] {
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
    let timeout = longPoll ? longPollTimeout : configuration.shortPollTimeout
    inFlight = .poll(request, longPoll: longPoll, deadline: now.advanced(by: timeout))
    metrics.polls += 1
    return [.poll(request, finger, dontBlock: !longPoll, timeout: timeout)]
  }

  private mutating func startRegister(now: Timestamp) -> [Action] {
    let request = newRequestID()
    phase = .registering
    inFlight = .register(request, deadline: now.advanced(by: configuration.registerTimeout))
    metrics.registers += 1
    return [.register(request, eventTypes: configuration.eventTypes, lifespan: configuration.queueLifespan)]
  }

  private mutating func proceedOutbox(now: Timestamp) -> [Action] {
    guard outbox?.canSend(now: now) == true else { return [] }
    let request = newRequestID()
    let deadline = now.advanced(by: configuration.submitTimeout)
    guard let body = outbox!.send(request, now: now, deadline: deadline) else { return [] }
    metrics.submits += 1
    return [.submit(request, body, queueID: phase.finger?.queueID)]
  }

  /// Cuts short a wait caused by connection failures, in the phase and in the outbox.
  private mutating func retryConnectionFailuresNow(now: Timestamp) -> [Action] {
    guard failure?.kind == .connection else { return proceed(now: now) }
    failure?.count = 0
    switch phase {
    case .pollFailed(let finger, _, _): phase = .pollFailed(finger, attempt: 0, retryAt: now)
    case .registerFailed: phase = .registerFailed(attempt: 0, retryAt: now)
    default: break
    }
    outbox?.retryNow()
    return proceed(now: now)
  }

  /// After a successful register or poll: take the finger, clear failures, and (in the foreground) connect.
  private mutating func markSuccess(finger: EventFinger, now: Timestamp) {
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
  private mutating func protocolFailure(_ reason: String, now: Timestamp) -> [Action] {
    protocolFailures += 1
    _ = noteFailure(.protocolError, reason: reason, now: now)
    let retryAt = now.advanced(by: configuration.protocolErrorBackoff.delay(attempt: protocolFailures, using: &random))
    phase = .registerFailed(attempt: protocolFailures, retryAt: retryAt)
    return [.persist(persistedRecord())] + proceed(now: now)
  }

  /// Stops until ``resume(now:)``, cancelling everything under way and keeping the finger.
  private mutating func stop(_ reason: StopReason, finger: EventFinger?) -> [Action] {
    var actions: [Action] = []
    if let inFlight { actions.append(.cancel(inFlight.request)) }
    if let request = outbox?.abandonInFlight() { actions.append(.cancel(request)) }
    inFlight = nil
    phase = .stopped(reason, finger: finger ?? phase.finger)
    return actions + [.persist(persistedRecord())]
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

  private mutating func wait(_ policy: BackoffPolicy, _ attempt: Int, _ retryAfter: Duration?) -> Duration {
    let jittered = policy.delay(attempt: attempt, using: &random)
    return max(jittered, retryAfter ?? .zero)
  }

  private mutating func newRequestID() -> RequestID {
    defer { nextRequestID += 1 }
    return RequestID(rawValue: nextRequestID)
  }
}
