import EventProtocol
import Foundation

/// Keeps an app's copy of server data correct and live: registers for an atomic snapshot plus an event
/// finger, long-polls, applies each event exactly once, backs off on failure, re-registers when the queue
/// expires, polls less in the background, polls at once on a push hint, persists everything, and sends
/// writes through a persisted outbox.
///
/// The actor is a thin shell around ``UpdateMachineCore``: it reads the injected clock, performs the
/// core's actions (requests through the transport, atomic writes to the store, cancellations), keeps one
/// timer for the core's next deadline, and publishes snapshots. It makes no decisions of its own.
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
  public typealias Core = UpdateMachineCore<State, Event, Mutation>
  public typealias Snapshot = UpdateMachineSnapshot<State, Mutation>

  private var core: Core
  private let transport: any EventTransport<State, Event, Mutation>
  private let store: any UpdateStore
  private let readClock: @Sendable () -> Timestamp
  private let sleepUntil: @Sendable (Timestamp) async throws -> Void
  private var requests: [Core.RequestID: Task<Void, Never>] = [:]
  private var timer: Task<Void, Never>?
  private var timerDeadline: Timestamp?
  private var observers: [UInt64: AsyncStream<Snapshot>.Continuation] = [:]
  private var nextObserverID: UInt64 = 0
  private var lastPublished: Snapshot?
  private var persistenceIssue: PersistenceError?
  private var runWaiter: CheckedContinuation<Void, Never>?
  private var isStarted = false
  private var isStopped = false

  /// Creates a machine; nothing happens until ``start()``.
  /// - Parameters:
  ///   - reducer: How events change the state.
  ///   - transport: How to reach the server.
  ///   - store: Where to persist state, finger, timestamps and outbox.
  ///   - clock: The clock for timeouts, backoff and background polls.
  ///   - anchor: The timestamp the clock's current instant stands for; the wall clock's when `nil`.
  ///   - configuration: Registration, retry and freshness settings.
  ///   - lifecycle: Whether the app starts in the foreground.
  ///   - random: The source of backoff jitter and of a new installation's client id.
  public init<Transport: EventTransport, C: Clock>(
    reducer: some UpdateReducer<State, Event, Mutation>,
    transport: Transport,
    store: some UpdateStore,
    clock: C,
    anchor: Timestamp? = nil,
    configuration: UpdateMachineConfiguration = .init(),
    lifecycle: AppLifecycle = .foreground,
    random: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator()
  ) where Transport.State == State, Transport.Event == Event, Transport.Mutation == Mutation, C.Duration == Duration {
    let timeline = Timeline(clock: clock, anchor: anchor)
    self.core = Core(reducer: reducer, configuration: configuration, lifecycle: lifecycle, random: random)
    self.transport = transport
    self.store = store
    self.readClock = { timeline.now() }
    self.sleepUntil = { try await timeline.sleep(until: $0) }
  }

  /// Creates a machine on the continuous clock.
  public init<Transport: EventTransport>(
    reducer: some UpdateReducer<State, Event, Mutation>,
    transport: Transport,
    store: some UpdateStore,
    configuration: UpdateMachineConfiguration = .init(),
    lifecycle: AppLifecycle = .foreground
  ) where Transport.State == State, Transport.Event == Event, Transport.Mutation == Mutation {
    self.init(
      reducer: reducer,
      transport: transport,
      store: store,
      clock: ContinuousClock(),
      configuration: configuration,
      lifecycle: lifecycle
    )
  }

  // MARK: - Lifecycle

  /// Loads the persisted record (setting an unreadable one aside and starting stale), then starts
  /// registering or polling. Calling it again does nothing.
  public func start() {
    guard !isStarted, !isStopped else { return }
    isStarted = true
    var record: PersistedRecord<State, Mutation>?
    do {
      if let data = try store.load() { record = try PersistedRecord<State, Mutation>.decode(data) }
    } catch {
      persistenceIssue = error
      do {
        let location = try store.setAside(reason: error.description)
        persistenceIssue = error.noting("set aside at \(location)")
      } catch {
        persistenceIssue = error
      }
    }
    let now = readClock()
    perform(core.loaded(record, now: now), now: now)
  }

  /// Cancels every request and the timer, and finishes every snapshot stream. The persisted record stays.
  public func stop() {
    guard !isStopped else { return }
    isStopped = true
    timer?.cancel()
    timer = nil
    for task in requests.values { task.cancel() }
    requests = [:]
    for observer in observers.values { observer.finish() }
    observers = [:]
    runWaiter?.resume()
    runWaiter = nil
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

  /// A push notification hinted at news; `lastEventID` is the server's latest event id, when it sent one.
  public func pushReceived(queueID: QueueID? = nil, lastEventID: Int? = nil) {
    input { core, now in core.pushReceived(.init(queueID: queueID, lastEventID: lastEventID), now: now) }
  }

  /// Sends a mutation through the outbox: persisted first, retried until acknowledged, applied at most once.
  /// Its optimistic effect shows in ``snapshot`` until the server's events confirm it. Starts the machine
  /// first if ``start()`` was not called yet.
  /// - Returns: The mutation's id.
  public func submit(_ mutation: Mutation) -> MutationID {
    start()
    let now = readClock()
    let (id, actions) = core.submit(mutation, now: now)
    perform(actions, now: now)
    return id
  }

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
      pendingMutations: core.outbox,
      rejectedMutations: core.rejected,
      metrics: core.metrics,
      persistenceIssue: persistenceIssue
    )
  }

  // MARK: - Performing actions

  private func input(_ transition: (inout Core, Timestamp) -> [Core.Action]) {
    guard isStarted, !isStopped else { return }
    let now = readClock()
    perform(transition(&core, now), now: now)
  }

  private func perform(_ actions: [Core.Action], now: Timestamp) {
    guard !isStopped else { return }
    for action in actions {
      switch action {
      case .persist(let record):
        do {
          try store.save(try record.encoded())
        } catch {
          persistenceIssue = error
        }
      case .register(let request, let eventTypes, let lifespan):
        requests[request] = Task { [transport] in
          switch await Self.capture({ () async throws(TransportError) in
            try await transport.register(eventTypes: eventTypes, lifespan: lifespan)
          }) {
          case .success(let registration):
            self.completed(request) { core, now in core.registerSucceeded(request, registration, now: now) }
          case .failure(let error):
            self.completed(request) { core, now in core.registerFailed(request, error, now: now) }
          }
        }
      case .poll(let request, let finger, let dontBlock, let timeout):
        let deadline = now.advanced(by: timeout)
        requests[request] = Task { [transport, sleepUntil] in
          let result = await Self.poll(
            transport,
            finger,
            dontBlock: dontBlock,
            deadline: deadline,
            sleepUntil: sleepUntil
          )
          switch result {
          case .success(let events):
            self.completed(request) { core, now in core.pollSucceeded(request, events, now: now) }
          case .failure(let error):
            self.completed(request) { core, now in core.pollFailed(request, error, now: now) }
          }
        }
      case .submit(let request, let body, let queueID):
        requests[request] = Task { [transport] in
          switch await Self.capture({ () async throws(TransportError) in
            try await transport.submit(body, queueID: queueID)
          }) {
          case .success(let receipt):
            self.completed(request) { core, now in core.submitSucceeded(request, receipt, now: now) }
          case .failure(let error):
            self.completed(request) { core, now in core.submitFailed(request, error, now: now) }
          }
        }
      case .cancel(let request):
        requests.removeValue(forKey: request)?.cancel()
      }
    }
    reschedule(now: now)
    publish(now: now)
  }

  /// Polls, failing with a timeout if `deadline` passes first.
  private static func poll(
    _ transport: any EventTransport<State, Event, Mutation>,
    _ finger: EventFinger,
    dontBlock: Bool,
    deadline: Timestamp,
    sleepUntil: @escaping @Sendable (Timestamp) async throws -> Void
  ) async -> Result<[EventEnvelope<Event>], TransportError> {
    await withTaskGroup(of: Result<[EventEnvelope<Event>], TransportError>?.self) { group in
      group.addTask {
        await capture { () async throws(TransportError) in try await transport.poll(after: finger, dontBlock: dontBlock)
        }
      }
      group.addTask {
        do {
          try await sleepUntil(deadline)
          return .failure(.timedOut)
        } catch {
          return nil
        }
      }
      var outcome: Result<[EventEnvelope<Event>], TransportError> = .failure(.cancelled)
      for await result in group {
        if let result {
          outcome = result
          break
        }
      }
      group.cancelAll()
      return outcome
    }
  }

  /// Runs a transport call and captures its typed outcome.
  private static func capture<Value>(
    _ call: () async throws(TransportError) -> Value
  ) async -> Result<Value, TransportError> {
    do {
      return .success(try await call())
    } catch {
      return .failure(error)
    }
  }

  private func completed(_ request: Core.RequestID, _ transition: (inout Core, Timestamp) -> [Core.Action]) {
    guard requests.removeValue(forKey: request) != nil, !isStopped else { return }
    let now = readClock()
    perform(transition(&core, now), now: now)
  }

  private func timerFired(at deadline: Timestamp) {
    guard deadline == timerDeadline, !isStopped else { return }
    timerDeadline = nil
    let now = readClock()
    perform(core.timerFired(now: now), now: now)
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
