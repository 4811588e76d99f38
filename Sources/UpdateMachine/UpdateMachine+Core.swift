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
    /// Send a register request for this installation.
    case register(RequestID, eventTypes: Set<String>?, lifespan: Duration?, clientID: ClientID)
    /// Send a poll; the core times it out itself after `timeout` (a transport may use it as its own).
    case poll(RequestID, EventFinger, dontBlock: Bool, timeout: Duration)
    /// Send a mutation from the outbox.
    case submit(RequestID, MutationBatch<Mutation>, queueID: QueueID?)
    /// Cancel a request under way; its answer, if any, will be ignored.
    case cancel(RequestID)
    /// Send a fetch of a page of partial state, read against `queueID`; the core times it out itself after
    /// `timeout`.
    case fetch(RequestID, FetchRequest, queueID: QueueID, timeout: Duration)
    /// A fetch the app asked for (``fetch(_:now:)``) ended: merged into the state, or failed.
    case fetchFinished(RequestID, FetchOutcome)
    /// Write the record atomically, then report the result before performing the next action. The change
    /// says how its state differs from the previous `.persist`'s, so a journaling store can append the events
    /// instead of rewriting the record.
    case persist(PersistedRecord<State, Mutation>, StateChange<Event>)
  }

  /// A push notification's hint that something changed.
  public struct PushHint: Equatable, Sendable {
    /// The queue the hint is about, when the server said.
    public var queueID: QueueID?
    /// The server's latest event id for that queue, when the server said.
    public var lastEventID: Int?
    /// The queue's unacknowledged events, when the push carried them.
    public var events: [EventEnvelope<Event>]?

    /// Creates a PushHint from its parts.
    public init(queueID: QueueID? = nil, lastEventID: Int? = nil, events: [EventEnvelope<Event>]? = nil) {
      self.queueID = queueID
      self.lastEventID = lastEventID
      self.events = events
    }

    /// The hint a push payload carries.
    public init(_ payload: PushPayload<Event>) {
      self.init(queueID: payload.queueID, lastEventID: payload.lastEventID, events: payload.events)
    }
  }

  /// A batch of events applied to a copy of the confirmed state.
  struct AppliedBatch {
    var state: State
    var lastEventID: Int
    var applied: Int
    var origins: [MutationOrigin]
    /// The events applied, in order, in their envelopes: what a journal entry records.
    var events: [EventEnvelope<Event>] = []
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

  let reducer: any UpdateReducer<State, Event, Mutation>
  /// The reducer's partial part, when it has one.
  let partial: (any PartialReducing<State, Event>)?
  /// Fetches of partial state under way or waiting for the finger.
  var fetches = FetchTracker<Event>()
  /// The narrows the app shows (``show(_:)``): never forgotten while shown.
  public internal(set) var shownNarrows: Set<Narrow> = []
  /// How the machine registers, retries and reports.
  public let configuration: UpdateMachineConfiguration
  var random: any RandomNumberGenerator & Sendable

  /// The current phase.
  public internal(set) var phase: Phase = .stale
  /// The state as the server confirmed it; `nil` until persisted data is loaded.
  public internal(set) var confirmedState: State?
  /// Whether a register or a poll has succeeded since the machine loaded.
  var reachedServerThisSession = false
  /// How the confirmed state changed since the last `.persist` action was emitted.
  var unsavedChange: StateChange<Event> = .replaced
  /// How many times the next poll's limit was doubled: once for each poll in a row that came back full, while
  /// the limit is under its ceiling.
  var pollLimitDoublings = 0
  /// Whether the app is in the foreground.
  public internal(set) var lifecycle: AppLifecycle
  /// The outbox; `nil` until persisted data is loaded.
  public internal(set) var outbox: Outbox<Mutation>?
  /// Counters.
  public internal(set) var metrics = UpdateMetrics()
  /// What reading the persisted record had to do (set aside, migrated, discarded), if anything.
  public internal(set) var storeRecovery: [StoreRecovery] = []
  /// The app's device-local data, saved with every record.
  public internal(set) var deviceData: DeviceData?

  var lastContactAt: Timestamp?
  var dataAsOf: Timestamp?
  var queueLifetime: Duration
  var longPollTimeout: Duration
  var disconnectedSince: Timestamp?
  /// Whether the platform said the network is gone and nothing since has shown it back (a success, a push,
  /// ``networkBecameAvailable(now:)``): retries then wait for ``UpdateMachineConfiguration/offlineProbeInterval``.
  var networkReportedLost = false
  var failure: Failure?
  var protocolFailures = 0
  /// How many queues in a row vanished before a poll on them succeeded.
  var queuesLostBeforeFirstPoll = 0
  /// Whether a poll has succeeded on the current finger's queue since it was registered.
  var queueConfirmedByPoll = false
  var inFlight: InFlight?
  /// The latest event id named by a push that arrived during a non-blocking poll (`Int.max`: unknown).
  var deferredPushEventID: Int?
  var saving: Saving = .saved
  var nextRequestID: UInt64 = 1
  /// How many times the network was seen coming back: reported by the platform
  /// (``networkBecameAvailable(now:)``) or shown by a register or poll reaching the server after a failure or
  /// a disconnection. A request's failure to connect says something about the network only when the request
  /// was sent after the last such return; otherwise it is news of the network as it was, and the request
  /// goes again at once.
  var networkReturns: UInt64 = 0
  /// ``networkReturns`` when the register or poll in flight was sent.
  var inFlightSentAtNetworkReturns: UInt64 = 0
  /// ``networkReturns`` when the outbox's last request was sent.
  var outboxSentAtNetworkReturns: UInt64 = 0
  /// Whether the outbox waits after failing to connect (not a wait the server asked for, as a 503's or a rate
  /// limit's): the next reconnection ends it.
  var outboxWaitsForNetwork = false

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
    self.partial = Self.partialComposer(of: reducer)
    self.configuration = configuration
    self.lifecycle = lifecycle
    self.random = random
    self.queueLifetime = configuration.assumedQueueLifetime
    self.longPollTimeout = configuration.defaultLongPollTimeout.clamped(to: configuration.longPollTimeoutRange)
  }

  /// Whether persisted data has been loaded (before that the state is unknown and nothing is sent).
  ///
  /// Stored, not derived from `confirmedState`: it is read on every input, and comparing a generic
  /// optional state with `nil` copied the state through its metadata each time (a tenth of the simulator's
  /// metadata lookups).
  public private(set) var isLoaded = false

  /// This installation's id, once loaded.
  public var clientID: ClientID? { outbox?.clientID }

  /// The writes not yet confirmed, oldest first.
  public var pendingMutations: [OutboxEntry<Mutation>] { outbox?.entries ?? [] }

  /// The writes the server refused, until dismissed (the snapshot's `rejectedMutations`).
  public var rejectedMutations: [RejectedMutation<Mutation>] { outbox?.rejected ?? [] }

  /// The writes the server refused: the old name of ``rejectedMutations``.
  @available(*, deprecated, renamed: "rejectedMutations")
  public var rejected: [RejectedMutation<Mutation>] { rejectedMutations }

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
  /// - Parameters:
  ///   - record: What was read.
  ///   - recovery: What reading the record had to do, for the snapshot.
  ///   - now: The time it was read.
  public mutating func loaded(
    _ record: PersistedRecord<State, Mutation>?,
    recovery: [StoreRecovery] = [],
    now: Timestamp
  ) -> [Action] {
    precondition(!isLoaded, "loaded(_:recovery:now:) called twice")
    isLoaded = true
    saving = .saved  // the store opened: a failure to open it (storeOpenFailed) is over
    disconnectedSince = now
    storeRecovery = recovery
    var actions: [Action] = []
    if let record {
      deviceData = record.deviceData
      confirmedState = record.state
      enforcePartialLimits()
      unsavedChange = .replaced
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
      if !recovery.isEmpty { actions.append(persistAction()) }
    } else {
      outbox = Outbox(clientID: .random(using: &random))
      confirmedState = reducer.initialState
      unsavedChange = .replaced
      actions.append(persistAction())
    }
    return actions + proceed(now: now)
  }

  /// A `.persist` of the record as it stands, carrying the state's change since the previous one.
  mutating func persistAction() -> Action {
    defer { unsavedChange = .applied([]) }
    return .persist(persistedRecord(), unsavedChange)
  }

  /// The shell saved `record`: the writes it holds may now be sent, and any save issue is cleared.
  public mutating func persistSucceeded(_ record: PersistedRecord<State, Mutation>, now: Timestamp) -> [Action] {
    outbox?.saved(
      clientID: record.clientID,
      nextMutationID: record.nextMutationID,
      pending: Set(record.outbox.filter { !$0.isAcknowledged }.map(\.id))
    )
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
    // The failed save's change is not in the store: only a whole record brings it back in line.
    unsavedChange = .replaced
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
    let previous = confirmedState
    confirmedState = registration.snapshot
    queueReplaced(previous: previous)
    enforcePartialLimits()
    unsavedChange = .replaced
    queueLifetime = configuration.assumedQueueLifetime
    longPollTimeout = (registration.longPollTimeout ?? configuration.defaultLongPollTimeout)
      .clamped(to: configuration.longPollTimeoutRange)
    queueConfirmedByPoll = false
    pollLimitDoublings = 0
    markSuccess(finger: registration.finger, now: now)
    return [persistAction()] + proceed(now: now)
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
    let outdated = isOutdatedNews(kind, sentAt: inFlightSentAtNetworkReturns)
    let attempt = noteFailure(kind, reason: error.description, now: now)
    let delay = outdated ? .zero : wait(policy, attempt, retryAfter)
    phase = .registerFailed(attempt: attempt, retryAt: now.advanced(by: delay))
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
    let batch: AppliedBatch
    switch applyBatch(events, after: finger) {
    case .success(let applied): batch = applied
    case .failure(let failure): return protocolFailure(failure.reason, now: now)
    }
    adopt(batch)
    if let limit = pollBatchLimit, events.count >= limit {
      if limit < configuration.catchUpBatchLimit { pollLimitDoublings += 1 }
    } else {
      pollLimitDoublings = 0
    }
    let pages = mergeReadyPages(finger: batch.lastEventID)
    queueConfirmedByPoll = true
    queuesLostBeforeFirstPoll = 0
    markSuccess(finger: EventFinger(queueID: finger.queueID, lastEventID: batch.lastEventID), now: now)
    if let deferred = deferredPushEventID {
      deferredPushEventID = nil
      if deferred > batch.lastEventID, case .idle(let advanced, _) = phase {
        phase = .idle(advanced, nextPollAt: now)
      }
    }
    return [persistAction()] + pages.actions + proceed(now: now)
  }

  /// The most events the next poll asks for: ``UpdateMachineConfiguration/pollBatchLimit``, doubled for
  /// each poll in a row that came back full, up to ``UpdateMachineConfiguration/catchUpBatchLimit``; `nil`
  /// for all. The shell reads it when it performs a `.poll` action.
  public var pollBatchLimit: Int? {
    guard let first = configuration.pollBatchLimit else { return nil }
    let ceiling = max(first, configuration.catchUpBatchLimit)
    var limit = first
    for _ in 0..<pollLimitDoublings where limit < ceiling { limit = min(ceiling, limit * 2) }
    return limit
  }

  /// Applies `events` after `finger` to a copy of the confirmed state: events at or below the finger are
  /// skipped; ids must strictly increase; a reducer failure fails the whole batch.
  func applyBatch(_ events: [EventEnvelope<Event>], after finger: EventFinger) -> Result<AppliedBatch, ReducerError> {
    var state = confirmedState!
    var lastEventID = finger.lastEventID
    var applied = 0
    var origins: [MutationOrigin] = []
    var previousID: Int?
    // While every event so far is applied, the batch's events are `events` itself (the usual case: no copy,
    // no append per event); at the first one left out, the ones before it are copied and later ones appended.
    var leftOut: [EventEnvelope<Event>]?
    // Through the buffer, by index, each envelope read in place, into variables of their own: in code not
    // specialised for the event type (an app's default build), copying an envelope or its payload goes
    // through the type's value witnesses, a field of a generic struct (the batch) is found through its
    // metadata, and `enumerated()` looked its tuple type up, each once per event.
    let failure: ReducerError? = events.withUnsafeBufferPointer { envelopes in
      for position in envelopes.indices {
        let id = envelopes[position].id
        if let previousID, id <= previousID {
          return ReducerError("event id \(id) after \(previousID) in one batch")
        }
        previousID = id
        guard id > finger.lastEventID, let content = envelopes[position].content else {
          if leftOut == nil { leftOut = Array(envelopes[..<position]) }
          if id > finger.lastEventID {
            if let origin = envelopes[position].origin { origins.append(origin) }
            lastEventID = id
          }
          continue
        }
        do throws(ReducerError) {
          try reducer.reduce(content.payload, into: &state)
        } catch {
          return error
        }
        applied += 1
        leftOut?.append(envelopes[position])
        if let origin = envelopes[position].origin { origins.append(origin) }
        lastEventID = id
      }
      return nil
    }
    if let failure { return .failure(failure) }
    return .success(
      AppliedBatch(
        state: state,
        lastEventID: lastEventID,
        applied: applied,
        origins: origins,
        events: leftOut ?? events
      )
    )
  }

  /// Makes an applied batch the confirmed state, retiring the outbox entries its events came from.
  mutating func adopt(_ batch: AppliedBatch) {
    confirmedState = batch.state
    if partial != nil, batch.applied > 0 { enforcePartialLimits() }
    unsavedChange.append(AppliedEvents(envelopes: batch.events))
    fetches.record(batch.events)
    metrics.eventsApplied += batch.applied
    if !batch.origins.isEmpty { outbox?.eventsApplied(batch.origins) }
    if batch.applied > 0 { protocolFailures = 0 }
  }

  /// A poll failed. An expired queue re-registers at once; a connection failure, timeout, 5xx or rate limit
  /// retries the same finger after backoff; unauthorized stops; anything else re-registers after the
  /// slower backoff.
  public mutating func pollFailed(_ request: RequestID, _ error: TransportError, now: Timestamp) -> [Action] {
    guard case .poll(request, _, _) = inFlight, let finger = phase.finger else { return [] }
    inFlight = nil
    // A poll that failed (perhaps an answer too large for the network) starts again from the small batch.
    pollLimitDoublings = 0
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
        return [persistAction()] + proceed(now: now)
      }
    }
    let (kind, retryAfter) = classify(error)
    if kind == .protocolError { return protocolFailure(error.description, now: now) }
    let outdated = isOutdatedNews(kind, sentAt: inFlightSentAtNetworkReturns)
    let attempt = noteFailure(kind, reason: error.description, now: now)
    let delay = outdated ? .zero : wait(configuration.backoff, attempt, retryAfter)
    phase = .pollFailed(finger, attempt: attempt, retryAt: now.advanced(by: delay))
    return proceed(now: now)
  }

  /// The server answered the batch in flight with an outcome per write it decided: acknowledged writes stay
  /// (for their optimistic effect) until the events show them, refused ones move to `rejectedMutations`, a
  /// reused id makes the outbox take a new client id, and writes not decided go in the next batch.
  public mutating func submitAnswered(_ request: RequestID, _ outcomes: [MutationOutcome], now: Timestamp) -> [Action] {
    guard outbox?.requestInFlight == request else { return [] }
    let attempt = (outbox?.consecutiveFailures ?? 0) + 1
    let delay = wait(configuration.outboxBackoff, attempt, nil)
    guard let answer = outbox!.answered(request, outcomes, failureWait: delay, now: now) else { return [] }
    if answer.isFailure { metrics.failures += 1 }
    if answer.needsNewClientID {
      outbox!.adoptClientID(.random(using: &random))
      metrics.clientIDResets += 1
    }
    if let finger = phase.finger { outbox?.confirm(by: finger) }
    return [persistAction()] + proceed(now: now)
  }

  /// The server acknowledged the single write in flight (``submitAnswered(_:_:now:)`` with its receipt).
  public mutating func submitSucceeded(_ request: RequestID, _ receipt: MutationReceipt, now: Timestamp) -> [Action] {
    guard let mutation = outbox?.mutationsInFlight.first else { return [] }
    return submitAnswered(request, [.acknowledged(mutation, receipt)], now: now)
  }

  /// Sending the write in flight failed: refused ones are dropped and reported, a reused id makes the
  /// outbox take a new client id and send again, unauthorized stops the machine, others are retried.
  public mutating func submitFailed(_ request: RequestID, _ error: TransportError, now: Timestamp) -> [Action] {
    guard outbox?.requestInFlight == request else { return [] }
    if case .api(let apiError) = error.kind, apiError.code == .unauthorized {
      return stop(.unauthorized(message: apiError.message), finger: phase.finger)
    }
    let (kind, retryAfter) = classify(error)
    let sentBeforeReaching = isOutdatedNews(kind, sentAt: outboxSentAtNetworkReturns)
    let attempt = (outbox?.consecutiveFailures ?? 0) + 1
    let delay = sentBeforeReaching ? .zero : wait(configuration.outboxBackoff, attempt, retryAfter)
    switch outbox!.failed(request, error, wait: delay, now: now) {
    case .ignored:
      return []
    case .rejected:
      return [persistAction()] + proceed(now: now)
    case .needsNewClientID:
      outbox!.adoptClientID(.random(using: &random))
      metrics.clientIDResets += 1
      return [persistAction()] + proceed(now: now)
    case .willRetry:
      metrics.failures += 1
      outboxWaitsForNetwork = kind == .connection && !sentBeforeReaching
      return proceed(now: now)
    }
  }
}
