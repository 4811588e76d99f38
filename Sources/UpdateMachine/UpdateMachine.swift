import EventProtocol
import Foundation

/// Keeps an app's copy of server data correct and live: registers for an atomic snapshot plus an event
/// finger, long-polls, applies each event exactly once, backs off on failure, re-registers when the queue
/// expires, polls less in the background, polls at once on a push hint, persists everything, and sends
/// writes through a persisted outbox.
///
/// The actor is a thin shell around ``UpdateMachineCore``: it reads the injected clock, performs the
/// core's actions (requests through the transport, atomic writes to the store, cancellations), reports
/// each result back to the core, keeps one timer for the core's next deadline, and publishes snapshots.
/// It makes no decisions of its own.
///
/// ```swift
/// let machine = UpdateMachine(
///   reducer: NotesReducer(user: "alice"),
///   transport: InProcessTransport(server: server, user: "alice"),
///   store: FileStore(url: fileURL)
/// )
/// await machine.start()
/// for await snapshot in await machine.snapshots() { render(snapshot.state, snapshot.freshness) }
/// ```
public actor UpdateMachine<
  State: Codable & Sendable & Equatable,
  Event: EventPayload,
  Mutation: Codable & Sendable & Equatable
> {
  /// The pure state machine this actor performs.
  public typealias Core = UpdateMachineCore<State, Event, Mutation>
  /// What ``snapshots()`` yields.
  public typealias Snapshot = UpdateMachineSnapshot<State, Mutation>

  private var core: Core
  private let transport: any EventTransport<State, Event, Mutation>
  private let store: any UpdateStore
  private let restore: @Sendable (Data) -> PersistedRecord<State, Mutation>.Restoration
  private let replayJournal:
    @Sendable ([Data], PersistedRecord<State, Mutation>) -> (record: PersistedRecord<State, Mutation>, replayed: Int)
  /// The store, when it keeps a journal: saves after a batch then append the batch instead of the record.
  private let journalingStore: (any JournalingUpdateStore)?
  private var journal = JournalProgress()
  private let readClock: @Sendable () -> Timestamp
  private let sleepUntil: @Sendable (Timestamp) async throws -> Void
  private let log: (@Sendable (UpdateMachineLogEvent) -> Void)?
  private var requests: [RequestID: Task<Void, Never>] = [:]
  private var requestKinds: [RequestID: UpdateMachineLogEvent.RequestKind] = [:]
  private var timer: Task<Void, Never>?
  private var timerDeadline: Timestamp?
  private var observers: [UInt64: AsyncStream<Snapshot>.Continuation] = [:]
  private var nextObserverID: UInt64 = 0
  private var lastPublished: Snapshot?
  private var runWaiter: CheckedContinuation<Void, Never>?
  private var fetchWaiters: [RequestID: [CheckedContinuation<FetchOutcome, Never>]] = [:]
  private var isStarted = false
  private var isStopped = false

  /// How many times ``start()`` reads the store before deciding that a read error is not transient.
  public static var loadAttempts: Int { 3 }

  /// Creates a machine; nothing happens until ``start()``.
  /// - Parameters:
  ///   - reducer: How events change the state.
  ///   - transport: How to reach the server.
  ///   - store: Where to persist state, finger, timestamps and outbox.
  ///   - clock: The clock for deadlines, backoff and background polls.
  ///   - anchor: The timestamp the clock's current instant stands for; the wall clock's when `nil`.
  ///   - configuration: Registration, retry and freshness settings; an invalid one traps (see
  ///     ``UpdateMachineConfiguration/validate()``).
  ///   - lifecycle: Whether the app starts in the foreground.
  ///   - random: The source of backoff jitter and of a new installation's client id.
  ///   - log: Receives structured engine events; nothing is logged when `nil`.
  public init<Reducer: UpdateReducer, Transport: EventTransport, C: Clock>(
    reducer: Reducer,
    transport: Transport,
    store: any UpdateStore,
    clock: C,
    anchor: Timestamp? = nil,
    configuration: UpdateMachineConfiguration = .init(),
    lifecycle: AppLifecycle = .foreground,
    random: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
    log: (@Sendable (UpdateMachineLogEvent) -> Void)? = nil
  )
  where
    Reducer.State == State, Reducer.Event == Event, Reducer.Mutation == Mutation,
    Transport.State == State, Transport.Event == Event, Transport.Mutation == Mutation, C.Duration == Duration
  {
    let timeline = Timeline(clock: clock, anchor: anchor)
    self.core = Core(reducer: reducer, configuration: configuration, lifecycle: lifecycle, random: random)
    self.transport = transport
    self.store = store
    self.restore = { PersistedRecord<State, Mutation>.restore(from: $0, for: reducer) }
    self.replayJournal = { JournalEntry.replay($0, onto: $1, with: reducer) }
    self.journalingStore = store as? any JournalingUpdateStore
    self.readClock = { timeline.now() }
    self.sleepUntil = { try await timeline.sleep(until: $0) }
    self.log = log
  }

  /// Creates a machine on the continuous clock.
  public init<Reducer: UpdateReducer, Transport: EventTransport>(
    reducer: Reducer,
    transport: Transport,
    store: any UpdateStore,
    configuration: UpdateMachineConfiguration = .init(),
    lifecycle: AppLifecycle = .foreground,
    log: (@Sendable (UpdateMachineLogEvent) -> Void)? = nil
  )
  where
    Reducer.State == State, Reducer.Event == Event, Reducer.Mutation == Mutation,
    Transport.State == State, Transport.Event == Event, Transport.Mutation == Mutation
  {
    self.init(
      reducer: reducer,
      transport: transport,
      store: store,
      clock: ContinuousClock(),
      configuration: configuration,
      lifecycle: lifecycle,
      log: log
    )
  }

  // MARK: - Lifecycle

  /// Loads the persisted record, keeping every part that still reads (see
  /// ``PersistedRecord/restore(from:for:)``; a file that cannot be used whole is set aside, never deleted),
  /// then starts registering or polling. Calling it again does nothing.
  public func start() {
    guard !isStarted, !isStopped else { return }
    isStarted = true
    do {
      try store.open()
    } catch  where error.isSameKind(as: .inUse("")) {
      input { core, now in core.storeUnavailable(error.description, now: now) }
      return
    } catch {
      // Not another user of the file: the folder cannot be written (a lock file it cannot create). Reported
      // as the write failure it is (published while started); `resume()` tries again.
      input { core, now in core.storeOpenFailed(error, now: now) }
      isStarted = false
      return
    }
    let (record, recovery) = loadRecord()
    log?(.loaded(finger: record?.finger, pendingWrites: record?.outbox.count ?? 0, recovery: recovery))
    input { core, now in core.loaded(record, recovery: recovery, now: now) }
  }

  /// Reads the store, retrying a read error (it may be transient) before setting the file aside.
  private func loadRecord() -> (PersistedRecord<State, Mutation>?, [StoreRecovery]) {
    var readError: PersistenceError?
    var data: Data?
    for _ in 0..<Self.loadAttempts {
      do {
        data = try store.load()
        readError = nil
        break
      } catch {
        readError = error
      }
    }
    if let readError {
      return (nil, [.setAside(problem: readError, location: setAside(readError.description), strandedWrites: nil)])
    }
    guard let data else { return (nil, []) }
    let restoration = restore(data)
    guard restoration.mustSetAside else {
      guard let record = restoration.record else { return (nil, restoration.notes) }
      let (replayed, journalNotes) = replayingJournal(onto: record, of: data, notes: restoration.notes)
      return (replayed, restoration.notes + journalNotes)
    }
    let location = setAside(restoration.notes.map(\.description).joined(separator: "; "))
    let notes = restoration.notes.map { note -> StoreRecovery in
      if case .setAside(let problem, nil, let stranded) = note {
        return .setAside(problem: problem, location: location, strandedWrites: stranded)
      }
      return note
    }
    return (restoration.record, notes)
  }

  /// `record` with the journal appended after `data` replayed onto it. A record whose state was discarded
  /// (it no longer decodes) gets no replay: the events would apply to the wrong state. When an entry cannot
  /// be replayed (this build cannot read it), the record and journal are set aside, kept, and the machine
  /// goes on from the last entry it could read, as it does with a record it cannot read.
  private func replayingJournal(
    onto record: PersistedRecord<State, Mutation>,
    of data: Data,
    notes: [StoreRecovery]
  ) -> (PersistedRecord<State, Mutation>, [StoreRecovery]) {
    let stateKept = notes.allSatisfy { if case .stateMigrated = $0 { true } else { false } }
    guard let journalingStore, stateKept, let entries = try? journalingStore.loadJournal(after: data),
      !entries.isEmpty
    else {
      return (record, [])
    }
    let (replayed, count) = replayJournal(entries, record)
    guard count < entries.count else {
      journal = JournalProgress(isBound: true, bytes: entries.reduce(0) { $0 + $1.count }, wholeBytes: data.count)
      return (replayed, [])
    }
    let problem = PersistenceError.corrupt("journal entry \(count + 1) of \(entries.count) cannot be replayed")
    return (replayed, [.setAside(problem: problem, location: setAside(problem.description), strandedWrites: nil)])
  }

  /// Saves `record`: appends the change to the journal when the store keeps one bound to the last save and
  /// the journal is still smaller than the record, else writes the whole record (which starts a new journal).
  /// - Returns: The bytes written.
  private func save(
    _ record: PersistedRecord<State, Mutation>,
    _ change: StateChange<Event>
  ) throws(PersistenceError)
    -> Int
  {
    if let journalingStore, journal.isBound, case .applied(let events) = change, !journal.isDueForCompaction {
      let entry = try JournalEntry(record, events: events).encoded()
      do {
        try journalingStore.appendToJournal(entry)
      } catch {
        journal.isBound = false
        throw error
      }
      journal.bytes += entry.count
      log?(.journaled(bytes: entry.count, events: events.count))
      return entry.count
    }
    let data = try record.encoded()
    journal.isBound = false
    try store.save(data)
    journal = JournalProgress(isBound: journalingStore != nil, bytes: 0, wholeBytes: data.count)
    log?(.saved(bytes: data.count))
    return data.count
  }

  private func setAside(_ reason: String) -> String? {
    try? store.setAside(reason: reason)
  }

  /// Cancels every request and the timer, and finishes every snapshot stream. The persisted record stays.
  public func stop() {
    guard !isStopped else { return }
    isStopped = true
    store.close()
    timer?.cancel()
    timer = nil
    for task in requests.values { task.cancel() }
    requests = [:]
    for observer in observers.values { observer.finish() }
    observers = [:]
    runWaiter?.resume()
    runWaiter = nil
    for waiter in fetchWaiters.values.joined() { waiter.resume(returning: .failed(.cancelled)) }
    fetchWaiters = [:]
  }

  /// Starts the machine and runs until the calling task is cancelled, then stops it.
  public func run() async {
    start()
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        if isStopped { continuation.resume() } else { runWaiter = continuation }
      }
    } onCancel: {
      Task { await self.stop() }
    }
  }

  // MARK: - App input

  /// The app went to the background.
  public func enteredBackground() {
    input { core, now in core.enteredBackground(now: now) }
  }

  /// The app came to the foreground.
  public func enteredForeground() {
    input { core, now in core.enteredForeground(now: now) }
  }

  /// The platform's path monitor reports a usable network: a wait after connection failures ends now.
  public func networkBecameAvailable() {
    input { core, now in core.networkBecameAvailable(now: now) }
  }

  /// The platform's path monitor reports no network: the request under way counts as failed at once.
  public func networkLost() {
    input { core, now in core.networkLost(now: now) }
  }

  /// After the machine stopped (``UpdateMachineSnapshot/stopReason``), once the app has fixed the cause
  /// (new credentials in the transport): starts again with the kept state, finger and outbox. When the store
  /// could not be opened at start (``UpdateMachineSnapshot/persistenceIssue`` a write failure, such as a
  /// folder that cannot hold the lock file), it tries again.
  public func resume() {
    if !isStarted { start() }
    input { core, now in core.resume(now: now) }
  }

  /// A push notification hinted at news; `lastEventID` is the server's latest event id, when it sent one.
  public func pushReceived(queueID: QueueID? = nil, lastEventID: Int? = nil) {
    input { core, now in core.pushReceived(.init(queueID: queueID, lastEventID: lastEventID), now: now) }
  }

  /// A push notification arrived with the server's `PushPayload`: its events are applied with no request
  /// when they continue the finger; otherwise the machine polls (or registers) as for a bare hint.
  public func pushReceived(_ payload: PushPayload<Event>) {
    input { core, now in core.pushReceived(.init(payload), now: now) }
  }

  /// This installation's client id, once the persisted record is loaded: what the app registers its push
  /// token under (`EventServer.registerPushToken(_:user:clientID:)`, or the HTTP server's endpoint).
  public var clientID: ClientID? { core.clientID }

  /// Sends a mutation through the outbox: persisted first, sent once saved, retried until acknowledged,
  /// applied at most once. Its optimistic effect shows in ``snapshot`` until the server's events confirm
  /// it. Starts the machine first if ``start()`` was not called yet.
  /// - Returns: The mutation's id.
  public func submit(_ mutation: Mutation) -> MutationID {
    // A store that could not be opened holds no record to keep the write in: nothing is kept (id 0), and
    // `snapshot.stopReason` or `snapshot.persistenceIssue` says why.
    submit(contentsOf: [mutation]).first ?? MutationID(0)
  }

  /// Sends several mutations through the outbox at once, in order: as many ``submit(_:)`` calls would, but
  /// persisted in one save (one journal append and one fsync for all of them), then sent in batches of up
  /// to ``UpdateMachineConfiguration/maximumMutationsPerRequest``. For writes an app makes together (an
  /// import, a multi-select), or that arrive faster than the store saves.
  /// - Returns: The mutations' ids, in order; empty when the store could not be opened (as ``submit(_:)``
  ///   keeps nothing then).
  @discardableResult
  public func submit(contentsOf mutations: [Mutation]) -> [MutationID] {
    start()
    guard core.isLoaded else { return [] }
    var ids: [MutationID] = []
    input { core, now in
      let (newIDs, actions) = core.submit(contentsOf: mutations, now: now)
      ids = newIDs
      return actions
    }
    return ids
  }

  /// Fetches a page of a narrow of partial state and merges it into the state, composed exactly once with
  /// the events (see `docs/partial-state.md`). Starts the machine first if needed.
  ///
  /// The page is read against the machine's queue (once it has one); it is merged when the finger has
  /// reached the event id it was read at, with the events applied since applied to it. If the queue is lost
  /// meanwhile, it is fetched again against the next one.
  ///
  /// A failure worth retrying (no connection, a timeout, a 5xx, a rate limit) does not end the fetch: the
  /// engine tries again after its backoff (offline, when the network comes back), and ``snapshot`` shows
  /// where it stands (``UpdateMachineSnapshot/fetches``). The same request asked again while one is under
  /// way joins it.
  /// - Returns: ``FetchOutcome/merged`` once ``snapshot`` shows the page; or why it ended otherwise (a
  ///   reducer that is not a ``PartialUpdateReducer``, a request the server refuses, ``cancelFetch(_:)``,
  ///   the machine stopped).
  @discardableResult
  public func fetch(_ request: FetchRequest) async -> FetchOutcome {
    start()
    guard !isStopped else { return .failed(.cancelled) }
    return await withCheckedContinuation { continuation in
      let now = readClock()
      let (id, actions) = core.fetch(request, now: now)
      fetchWaiters[id, default: []].append(continuation)
      perform(actions, now: now)
    }
  }

  /// Asks for a page like ``fetch(_:)`` without waiting for it: the page lands in the state when it comes,
  /// and ``snapshot``'s ``UpdateMachineSnapshot/fetches`` shows its progress under the returned identity.
  /// The same request asked again while one is under way returns the same identity.
  /// - Returns: The fetch's identity, for ``cancelFetch(_:)``; `nil` when the machine has stopped.
  @discardableResult
  public func requestFetch(_ request: FetchRequest) -> RequestID? {
    start()
    guard !isStopped else { return nil }
    var fetchID: RequestID?
    input { core, now in
      let (id, actions) = core.fetch(request, now: now)
      fetchID = id
      return actions
    }
    return fetchID
  }

  /// The app no longer wants fetch `id` (the list scrolled away): it ends, and ``fetch(_:)`` callers
  /// waiting for it get ``FetchOutcome/failed(_:)`` with a cancellation.
  public func cancelFetch(_ id: RequestID) {
    input { core, _ in core.cancelFetch(id) }
  }

  /// Says which narrows of the partial state the app shows now (the lists on screen), replacing what it
  /// said before. They count as used now, and stay held while shown, even past
  /// ``UpdateMachineConfiguration/partialLimits``: only narrows off screen are forgotten. Starts the machine
  /// first if needed.
  ///
  /// ```swift
  /// await machine.show([billing])  // the billing list is on screen
  /// ```
  public func show(_ narrows: Set<Narrow>) {
    start()
    input { core, _ in
      core.show(narrows)
      return []
    }
  }

  /// Saves the app's device-local data (transfers, caches: what is never synced) in the same atomic write
  /// as the state, the finger and the outbox. Starts the machine first if needed.
  public func saveDeviceData(_ data: Data) {
    start()
    input { core, now in core.deviceDataChanged(data, now: now) }
  }

  /// The app's device-local data as last saved (restored by ``start()``).
  public var deviceData: Data? { core.deviceData }

  /// Forgets the refused mutations up to `id`, once the app has shown them to the user.
  public func dismissRejectedMutations(through id: MutationID) {
    input { core, now in core.rejectionsDismissed(through: id, now: now) }
  }

  // MARK: - Observation

  /// What the UI should show now.
  public var snapshot: Snapshot { makeSnapshot(now: readClock()) }

  /// A stream of snapshots: the current one at once, then each change, until ``stop()``.
  public func snapshots() -> AsyncStream<Snapshot> {
    let (stream, continuation) = AsyncStream.makeStream(of: Snapshot.self, bufferingPolicy: .bufferingNewest(1))
    guard !isStopped else {
      continuation.finish()
      return stream
    }
    let id = nextObserverID
    nextObserverID += 1
    observers[id] = continuation
    continuation.yield(makeSnapshot(now: readClock()))
    continuation.onTermination = { _ in Task { await self.removeObserver(id) } }
    return stream
  }

  private func removeObserver(_ id: UInt64) {
    observers[id] = nil
  }

  private func makeSnapshot(now: Timestamp) -> Snapshot {
    Snapshot(
      state: core.displayedState,
      confirmedState: core.confirmedState,
      phase: core.phase,
      freshness: core.freshness(now: now),
      pendingMutations: core.pendingMutations,
      rejectedMutations: core.rejectedMutations,
      metrics: core.metrics,
      persistenceIssue: core.persistenceIssue,
      storeRecovery: core.storeRecovery,
      isConfirmedThisSession: core.isConfirmedThisSession,
      fetches: core.fetchStatuses
    )
  }

  // MARK: - Performing actions

  /// Runs one transition of the core, performs its actions, and logs what changed.
  private func input(_ transition: (inout Core, Timestamp) -> [Core.Action]) {
    guard isStarted, !isStopped else { return }
    let now = readClock()
    if let due = timerDeadline, due <= now {
      // The timer is due but its task has not run yet: its work (a request's deadline, a retry) comes first,
      // or the next wake-up, computed after `now`, would leave it out and the machine would wait for ever.
      timerDeadline = nil
      perform(core.timerFired(now: now), now: now)
    }
    let before = (phase: core.phase, pending: core.pendingMutations.count, rejected: core.rejectedMutations.count)
    let clientID = core.clientID
    perform(transition(&core, now), now: now)
    guard let log else { return }
    if core.phase != before.phase { log(.phaseChanged(from: before.phase, to: core.phase)) }
    if (core.pendingMutations.count, core.rejectedMutations.count) != (before.pending, before.rejected) {
      log(.outboxChanged(pending: core.pendingMutations.count, rejected: core.rejectedMutations.count))
    }
    if let clientID, let newID = core.clientID, newID != clientID { log(.clientIDChanged(newID)) }
  }

  /// Performs actions in order; a save's result goes back to the core at once, and its actions are
  /// performed next.
  private func perform(_ initial: [Core.Action], now: Timestamp) {
    var actions = initial
    var index = 0
    while index < actions.count, !isStopped {
      let action = actions[index]
      index += 1
      switch action {
      case .persist(let record, let change):
        do {
          _ = try save(record, change)
          actions += core.persistSucceeded(record, now: now)
        } catch {
          log?(.saveFailed(error))
          actions += core.persistFailed(error, now: now)
        }
      case .register(let request, let eventTypes, let lifespan, let clientID):
        send(request, .register) { [transport] () async throws(TransportError) in
          try await transport.register(eventTypes: eventTypes, lifespan: lifespan, clientID: clientID)
        } completion: { core, result, now in
          switch result {
          case .success(let registration): core.registerSucceeded(request, registration, now: now)
          case .failure(let error): core.registerFailed(request, error, now: now)
          }
        }
      case .poll(let request, let finger, let dontBlock, _):
        let limit = core.pollBatchLimit
        send(request, .poll(finger, dontBlock: dontBlock)) { [transport] () async throws(TransportError) in
          try await transport.poll(after: finger, dontBlock: dontBlock, limit: limit)
        } completion: { core, result, now in
          switch result {
          case .success(let events): core.pollSucceeded(request, events, now: now)
          case .failure(let error): core.pollFailed(request, error, now: now)
          }
        }
      case .submit(let request, let body, let queueID):
        send(request, .submit(body.requests.map(\.mutationID))) { [transport] () async throws(TransportError) in
          try await transport.submit(body, queueID: queueID)
        } completion: { core, result, now in
          switch result {
          case .success(let outcomes): core.submitAnswered(request, outcomes, now: now)
          case .failure(let error): core.submitFailed(request, error, now: now)
          }
        }
      case .fetch(let request, let fetchRequest, let queueID, _):
        // The core asks to fetch only when its reducer holds partial state.
        guard let partial = core.partial else { continue }
        send(request, .fetch(fetchRequest)) { [transport] () async throws(TransportError) in
          try await partial.fetchPage(fetchRequest, queueID: queueID, through: transport)
        } completion: { core, result, now in
          switch result {
          case .success(let answer): core.fetchAnswered(request, answer, now: now)
          case .failure(let error): core.fetchFailed(request, error, now: now)
          }
        }
      case .fetchFinished(let request, let outcome):
        for waiter in fetchWaiters.removeValue(forKey: request) ?? [] { waiter.resume(returning: outcome) }
      case .cancel(let request):
        if let task = requests.removeValue(forKey: request) {
          task.cancel()
          requestKinds[request] = nil
          log?(.requestCancelled(request))
        }
      }
    }
    reschedule(now: now)
    publish(now: now)
  }

  /// Starts a request; its outcome goes to the core through `completion`, unless it was cancelled first.
  private func send<Value: Sendable>(
    _ request: RequestID,
    _ kind: UpdateMachineLogEvent.RequestKind,
    _ call: @escaping @Sendable () async throws(TransportError) -> Value,
    completion: @escaping @Sendable (inout Core, Result<Value, TransportError>, Timestamp) -> [Core.Action]
  ) {
    requestKinds[request] = kind
    log?(.requestSent(request, kind))
    requests[request] = Task {
      let result: Result<Value, TransportError>
      do throws(TransportError) {
        result = .success(try await call())
      } catch {
        result = .failure(error)
      }
      self.completed(request, result, completion)
    }
  }

  private func completed<Value>(
    _ request: RequestID,
    _ result: Result<Value, TransportError>,
    _ completion: (inout Core, Result<Value, TransportError>, Timestamp) -> [Core.Action]
  ) {
    guard requests.removeValue(forKey: request) != nil, !isStopped else { return }
    let kind = requestKinds.removeValue(forKey: request)
    if let log, let kind {
      switch result {
      case .success: log(.requestSucceeded(request, kind))
      case .failure(let error): log(.requestFailed(request, kind, error, core.classify(error).kind))
      }
    }
    input { core, now in completion(&core, result, now) }
  }

  private func timerFired(at deadline: Timestamp) {
    guard deadline == timerDeadline, !isStopped else { return }
    timerDeadline = nil
    input { core, now in core.timerFired(now: now) }
  }

  private func reschedule(now: Timestamp) {
    let deadline = core.nextWakeUp(after: now)
    guard deadline != timerDeadline else { return }
    timer?.cancel()
    timerDeadline = deadline
    guard let deadline else {
      timer = nil
      return
    }
    timer = Task { [sleepUntil] in
      do {
        try await sleepUntil(deadline)
      } catch {
        return
      }
      self.timerFired(at: deadline)
    }
  }

  private func publish(now: Timestamp) {
    let snapshot = makeSnapshot(now: now)
    guard snapshot != lastPublished else { return }
    lastPublished = snapshot
    for observer in observers.values { observer.yield(snapshot) }
  }
}
