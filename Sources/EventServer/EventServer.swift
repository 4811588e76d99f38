import EventProtocol
import Foundation

/// An in-process event-queue server with the contract of Zulip's: register for a snapshot atomic with an
/// event queue, long-poll with heartbeats, prune on acknowledgement, queue expiry and a clear
/// `BAD_EVENT_QUEUE_ID` error.
///
/// The server is a thin actor around ``EventServerStateMachine``: it reads the injected clock, parks a
/// poll's continuation until the machine completes it, and keeps one timer task sleeping until the
/// machine's next deadline (a heartbeat or a sweep). It makes no decisions of its own.
///
/// ```swift
/// let server = EventServer(application: MyApplication())
/// let registration = await server.register(user: "alice")
/// let events = try await server.events(queueID: registration.queueID, user: "alice",
///                                      lastEventID: registration.lastEventID)
/// ```
public actor EventServer<Application: ServerApplication, C: Clock> where C.Duration == Duration {
  /// The application's event type.
  public typealias Event = Application.Event
  typealias Machine = EventServerStateMachine<Application>

  var machine: Machine
  let timeline: Timeline<C>
  private let pushGateway: any PushGateway
  private var waiters: [PollID: PollWaiter] = [:]
  /// Who waits for a poll's outcome: a caller suspended in ``events(queueID:user:lastEventID:dontBlock:limit:)``,
  /// or a callback given to ``startPoll(queueID:user:lastEventID:dontBlock:limit:answer:)``.
  private enum PollWaiter {
    case suspended(CheckedContinuation<Machine.PollOutcome, Never>)
    case callback(@Sendable (Result<[EventEnvelope<Event>], any Error>) -> Void)
  }
  /// Who waits in ``waitForParkedPolls(count:)``, by a number of its own so a cancelled wait can be found.
  private var parkedWaiters: [UInt64: (count: Int, continuation: CheckedContinuation<Void, Never>)] = [:]
  private var nextParkedWaiterID: UInt64 = 0
  private var timerWaiters: [(instant: Timestamp, continuation: CheckedContinuation<Void, Never>)] = []
  private var lastTimerFiring: Timestamp?
  private var nextPollID: UInt64 = 0
  /// Why polls that a cluster node could not take to the log failed, until their callers read it.
  private var pollFailures: [PollID: ServerLogError] = [:]
  private var timer: Task<Void, Never>?
  private(set) var timerDeadline: Timestamp?
  /// How many timer tasks this server has started (tests check that a deadline moving later starts none).
  private(set) var timerTasksStarted = 0
  private var isShutDown = false
  var nextFailureWaiterID = 0
  /// How this server keeps what it decides: in memory, as a single durable server, or as a cluster node.
  let deployment: Deployment
  /// Where the application's state lives; a stored application's driver is set once, when the server
  /// starts serving it and before it is handed to any caller.
  var applicationStorage = ApplicationStorage.inMachine
  /// The stored application's inputs waiting for the database, and the batch under way.
  var storedBatches = StoredBatches()

  /// Creates a server.
  /// - Parameters:
  ///   - application: The application served.
  ///   - configuration: Limits and timings.
  ///   - clock: The clock for heartbeats, expiry and sweeps.
  ///   - anchor: The timestamp the clock's current instant stands for; the wall clock's when `nil`.
  ///   - random: The source of queue ids and heartbeat jitter.
  ///   - pushGateway: Where push notifications go; none are sent by default.
  public init(
    application: Application,
    configuration: EventServerConfiguration = .init(),
    clock: C,
    anchor: Timestamp? = nil,
    random: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
    pushGateway: any PushGateway = NoPushGateway()
  ) {
    let timeline = Timeline(clock: clock, anchor: anchor)
    self.timeline = timeline
    self.pushGateway = pushGateway
    self.machine = Machine(application: application, configuration: configuration, random: random, now: timeline.now())
    self.deployment = .inMemory
  }

  /// A durable server over a machine rebuilt from its log (see ``recovering(from:application:configuration:clock:anchor:random:pushGateway:snapshots:)``
  /// and ``joining(_:application:configuration:clock:anchor:random:pushGateway:replication:)``).
  init(machine: Machine, timeline: Timeline<C>, pushGateway: any PushGateway, deployment: Deployment) {
    self.machine = machine
    self.timeline = timeline
    self.pushGateway = pushGateway
    self.deployment = deployment
  }

  /// The application's current state.
  public var application: Application { machine.application }

  /// How many queues exist.
  public var queueCount: Int { machine.queueCount }

  /// How many polls are parked.
  public var parkedPollCount: Int { machine.parkedPollCount }

  /// Whether ``shutdown()`` was called: polls answer at once, and a poll ended by the shutdown was not
  /// abandoned by its client.
  public var isShuttingDown: Bool { isShutDown }

  /// The queue `queueID` as it stands, for inspection.
  public func queue(_ queueID: QueueID) -> EventQueue<Event>? { machine.queue(queueID) }

  /// The installations registered for pushes, with their tokens and platforms, sorted.
  public var pushRegistrations: [PushRecord] { machine.pushRegistry.records }

  /// Registers `user`: creates a queue and takes the snapshot atomically.
  /// - Parameters:
  ///   - user: The registering user.
  ///   - eventTypes: The event types to queue; `nil` for all.
  ///   - lifespan: The idle timeout asked for; `nil` or zero for 600 s, capped at 7 days.
  ///   - clientID: The installation registering, whose push notifications name this queue.
  /// - Returns: The queue id, `lastEventID` (-1) and the snapshot.
  /// - Throws: ``ServerLogError`` when a durable server cannot make the registration durable.
  public func register(
    user: UserID,
    eventTypes: Set<String>? = nil,
    lifespan: Duration? = nil,
    clientID: ClientID? = nil
  ) async throws(ServerLogError) -> Registration<Application.Snapshot> {
    try checkLogHealthy()
    if case .inTables(let driver) = applicationStorage {
      return try await driver.register(self, user, eventTypes, lifespan, clientID)
    }
    do {
      return try await decide {
        let (registration, actions) = self.machine.register(
          user: user,
          eventTypes: eventTypes,
          lifespan: lifespan,
          clientID: clientID,
          now: self.decisionNow()
        )
        return (registration, self.finish(actions))
      }
    } catch let error as ServerLogError {
      throw error
    } catch {
      throw .storage("\(error)")
    }
  }

  /// Reads a page of partial state for `user`, atomic with the caller's queue (see
  /// ``EventServerStateMachine/fetch(_:queueID:user:now:)``). On a cluster node the page and the event id
  /// come from this node's copy, which is consistent with itself.
  /// - Throws: `EventAPIError`: `BAD_EVENT_QUEUE_ID`, or `BAD_REQUEST`.
  public func fetch(
    _ request: FetchRequest,
    queueID: QueueID,
    user: UserID
  ) async throws(EventAPIError) -> FetchAnswer<Application.FetchedItem> {
    if case .inTables(let driver) = applicationStorage { return try await driver.fetch(self, request, queueID, user) }
    return try machine.fetch(request, queueID: queueID, user: user, now: timeline.now())
  }

  /// Polls a queue: acknowledges everything up to `lastEventID`, then returns every event still queued,
  /// waiting for one (or for a heartbeat 45–55 s later) when there are none and `dontBlock` is false.
  /// - Parameters:
  ///   - queueID: The queue.
  ///   - user: The authenticated caller.
  ///   - lastEventID: The last event applied.
  ///   - dontBlock: Answer at once even with nothing to deliver.
  ///   - limit: The most events to answer with, oldest first; `nil` for all.
  /// - Returns: The events, in increasing id order.
  /// - Throws: `EventAPIError` (`BAD_EVENT_QUEUE_ID`, or `BAD_REQUEST` for an id already pruned or never in
  ///   the queue); `CancellationError` when the task is cancelled or the server shuts down while waiting;
  ///   ``ServerLogError`` when a durable server's log has failed.
  public func events(
    queueID: QueueID,
    user: UserID,
    lastEventID: Int,
    dontBlock: Bool = false,
    limit: Int? = nil
  ) async throws -> [EventEnvelope<Event>] {
    try checkLogHealthy()
    let pollID = PollID(nextPollID)
    nextPollID += 1
    let outcome = await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Machine.PollOutcome, Never>) in
        waiters[pollID] = .suspended(continuation)
        beginPoll(pollID, queueID: queueID, user: user, lastEventID: lastEventID, dontBlock: dontBlock, limit: limit)
      }
    } onCancel: {
      Task { await self.cancelPoll(pollID) }
    }
    switch outcome {
    case .events(let events): return events
    case .failed(let error): throw error
    case .cancelled:
      if let failure = pollFailures.removeValue(forKey: pollID) { throw failure }
      if let failure = logFailure { throw failure }
      throw CancellationError()
    }
  }

  /// Polls as ``events(queueID:user:lastEventID:dontBlock:limit:)`` does, but answers through `answer`
  /// instead of suspending the caller: a parked poll then holds no task of its caller's, only `answer` (what
  /// the lean HTTP poll listener uses to keep a parked poll small).
  ///
  /// `answer` is called exactly once, on the server's executor: hand the result off (to an event loop, or a
  /// task) rather than work in it. It gets the events, or the error ``events(queueID:user:lastEventID:dontBlock:limit:)``
  /// would throw; a poll the server's shutdown ends gets no events (the client polls again later), and one
  /// ended by ``cancelPoll(_:)`` gets `CancellationError`.
  ///
  /// ```swift
  /// let poll = await server.startPoll(queueID: queue, user: "alice", lastEventID: -1) { result in
  ///   print(result)
  /// }
  /// await server.cancelPoll(poll)  // the client went away
  /// ```
  /// - Returns: The poll's id, for ``cancelPoll(_:)``.
  @discardableResult
  public func startPoll(
    queueID: QueueID,
    user: UserID,
    lastEventID: Int,
    dontBlock: Bool = false,
    limit: Int? = nil,
    answer: @escaping @Sendable (Result<[EventEnvelope<Event>], any Error>) -> Void
  ) -> PollID {
    let pollID = PollID(nextPollID)
    nextPollID += 1
    do {
      try checkLogHealthy()
    } catch {
      answer(.failure(error))
      return pollID
    }
    waiters[pollID] = .callback(answer)
    beginPoll(pollID, queueID: queueID, user: user, lastEventID: lastEventID, dontBlock: dontBlock, limit: limit)
    return pollID
  }

  /// Takes a poll whose waiter is in place to the machine: now, or in a cluster node's next turn.
  private func beginPoll(
    _ pollID: PollID,
    queueID: QueueID,
    user: UserID,
    lastEventID: Int,
    dontBlock: Bool,
    limit: Int?
  ) {
    let poll = {
      // A cluster node polls in its next turn: a poll cancelled before then has nothing to park.
      guard self.waiters[pollID] != nil else { return }
      self.finish(
        self.machine.poll(
          pollID,
          queueID: queueID,
          user: user,
          lastEventID: lastEventID,
          dontBlock: dontBlock || self.isShutDown,
          limit: limit,
          now: self.decisionNow()
        )
      )
    }
    guard case .clusterNode(_, let node) = deployment else { return poll() }
    if let failure = turnsUnavailable() {
      endPoll(pollID, failingWith: failure)
    } else {
      enqueueDecision(on: node, run: poll, fail: { self.endPoll(pollID, failingWith: $0) })
    }
  }

  /// Deletes one of `user`'s queues; a poll parked on it fails with `BAD_EVENT_QUEUE_ID`.
  /// - Throws: `BAD_EVENT_QUEUE_ID` for an unknown, expired or other user's queue; ``ServerLogError`` when a
  ///   durable server cannot make the deletion durable.
  public func deleteQueue(_ queueID: QueueID, user: UserID) async throws {
    try checkLogHealthy()
    try await decide { ((), self.finish(try self.machine.deleteQueue(queueID, user: user, now: self.decisionNow()))) }
  }

  /// Applies a command from `user` and delivers its events, atomically; returns once it is durable.
  /// - Throws: `BAD_REQUEST` when the application rejects the command; ``ServerLogError`` when a durable
  ///   server cannot make it durable.
  public func handle(_ command: Application.Command, from user: UserID) async throws {
    try checkLogHealthy()
    if case .inTables(let driver) = applicationStorage { return try await driver.handle(self, command, user) }
    try await decide { ((), self.finish(try self.machine.handle(command, from: user, now: self.decisionNow()))) }
  }

  /// Applies a mutation from a client's outbox at most once per (user, client, mutation id).
  /// - Returns: The receipt: whether it was applied now, and each of the user's queues' last event id.
  /// A durable server answers only once the mutation's record is durable, rejection included (a retry
  /// after a crash then meets the same decision).
  /// - Throws: `BAD_REQUEST` when the application rejects it (and for every repeat of it);
  ///   `MUTATION_ID_REUSED` when the id was already used by this client for a different write;
  ///   ``ServerLogError`` when a durable server cannot make it durable.
  public func applyMutation(
    _ command: Application.Command,
    from user: UserID,
    clientID: ClientID,
    mutationID: MutationID
  ) async throws -> MutationReceipt {
    try checkLogHealthy()
    if case .inTables(let driver) = applicationStorage {
      return try await driver.applyMutation(self, command, user, clientID, mutationID)
    }
    let (digest, commandBytes) = MutationDigest.measuring(command)
    return try await decideMutation(
      command,
      user: user,
      clientID: clientID,
      mutationID: mutationID,
      digest: digest,
      commandBytes: commandBytes
    )
  }

  /// Decides one mutation on the machine and answers once its decision is durable.
  func decideMutation(
    _ command: Application.Command,
    user: UserID,
    clientID: ClientID,
    mutationID: MutationID,
    digest: MutationDigest,
    commandBytes: Int? = nil
  ) async throws -> MutationReceipt {
    let outcome = try await decide { () -> (Result<MutationReceipt, EventAPIError>, UInt64) in
      let outcome: Result<MutationReceipt, EventAPIError>
      var actions: [Machine.Action] = []
      do throws(EventAPIError) {
        let (receipt, applied) = try self.machine.applyMutation(
          command,
          from: user,
          clientID: clientID,
          mutationID: mutationID,
          digest: digest,
          commandBytes: commandBytes,
          now: self.decisionNow()
        )
        outcome = .success(receipt)
        actions = applied
      } catch {
        outcome = .failure(error)
      }
      // A rejection is a decision too (remembered for repeats): it waits for durability like an acceptance.
      return (outcome, self.finish(actions))
    }
    return try outcome.get()
  }

  /// Applies a batch of one client's mutations in order, each at most once, and answers once all their
  /// decisions are durable together (one wait for the log, not one per mutation): in memory, one step and
  /// one group commit; for a stored application, consecutive inputs of one database transaction, each under
  /// its own savepoint (a write whose statement fails stops the batch there and fails the call).
  /// - Returns: One outcome per mutation decided, in order; it stops after a `MUTATION_ID_REUSED`
  ///   (``EventServerStateMachine/applyMutations(_:measured:from:now:)``).
  /// - Throws: `BAD_REQUEST` for a batch that cannot be decided (empty, over `MutationBatch/maximumCount`);
  ///   ``ServerLogError`` when a durable server cannot make it durable.
  public func applyMutations(
    _ batch: MutationBatch<Application.Command>,
    from user: UserID
  ) async throws -> [MutationOutcome] where Application.Command: Equatable {
    try checkLogHealthy()
    if let malformation = batch.malformation { throw EventAPIError.badRequest(malformation) }
    if case .inTables(let driver) = applicationStorage {
      return try await storedMutations(batch, from: user, driver: driver)
    }
    let measured = batch.requests.map { MutationDigest.measuring($0.mutation) }.map { ($0.0, $0.1) }
    return try await decide { () -> ([MutationOutcome], UInt64) in
      let (outcomes, actions) = try self.machine.applyMutations(
        batch,
        measured: measured,
        from: user,
        now: self.decisionNow()
      )
      return (outcomes, self.finish(actions))
    }
  }

  /// A stored application's batch: at most the mutation window, decided in order as consecutive inputs of
  /// the stored batches, so they share one transaction (``StoredDriver/applyMutations``).
  private func storedMutations(
    _ batch: MutationBatch<Application.Command>,
    from user: UserID,
    driver: StoredDriver<Application, C>
  ) async throws -> [MutationOutcome] where Application.Command: Equatable {
    let requests = batch.requests.prefix(max(machine.configuration.mutationWindow, 1)).map {
      (mutation: $0.mutation, clientID: $0.clientID, mutationID: $0.mutationID)
    }
    return try await driver.applyMutations(self, requests, user)
  }

  /// Changes the application's own bookkeeping outside any command (such as taking the list of files to
  /// delete). The change must not alter any user's snapshot: no event announces it.
  public func updateBookkeeping<Result: Sendable>(_ body: @Sendable (inout Application) -> Result) -> Result {
    machine.updateBookkeeping(body)
  }

  /// Registers the push token of one of `user`'s installations (its client id); it gets a push whenever
  /// an event is queued for the user while it is not long-polling. `platform` picks the sender (see
  /// ``PushNotification/platform``).
  /// - Throws: `BAD_REQUEST` (`EventAPIError`) for a token or client id out of bounds or one installation
  ///   too many (``EventServerStateMachine/registerPushToken(_:platform:user:clientID:now:)``); ``ServerLogError``
  ///   when a durable server cannot make it durable.
  public func registerPushToken(
    _ token: PushToken,
    platform: PushPlatform? = nil,
    user: UserID,
    clientID: ClientID
  ) async throws {
    try checkLogHealthy()
    try await decide {
      try self.machine.registerPushToken(
        token,
        platform: platform,
        user: user,
        clientID: clientID,
        now: self.decisionNow()
      )
      return ((), self.finish([]))
    }
  }

  /// Stops the timer and ends every parked poll with `CancellationError`, keeping their events queued.
  /// Later polls answer at once instead of parking.
  ///
  /// A cluster node answers its parked polls at once with ``ServerLogError/storage(_:)`` (over HTTP, `503`:
  /// the client polls again, reaching the node that serves its queue next), then records their
  /// acknowledgements in a turn. Were the polls answered by that turn, a turn that cannot finish (a database
  /// too slow for the log's deadline while the node's partition moves) would strand them until their
  /// heartbeat: a partition host gives up on a stopping node after twice the log's deadline.
  ///
  /// A server with a log returns once what the shutdown recorded (the polls' acknowledgements) is durable,
  /// so a server recovering from the same log next finds it all and announces its restart to every queue
  /// (docs/protocol.md, "Restart"). A log that fails meanwhile is reported by ``logFailure``; the restart
  /// then recovers from what is durable.
  public func shutdown() async {
    isShutDown = true
    switch deployment {
    case .inMemory, .singleServer:
      finish(machine.connectionsDropped(now: timeline.now()))
    case .clusterNode(_, let node):
      failParkedPolls(with: .storage("this node is stopping: poll again"))
      stopFollowing(node)
      enqueueDecision(
        on: node,
        run: { self.finish(self.machine.connectionsDropped(now: self.decisionNow())) },
        fail: { _ in self.perform(self.machine.connectionsDropped(now: self.timeline.now())) }
      )
    }
    timer?.cancel()
    timer = nil
    timerDeadline = nil
    // A single server: every record given to the log, the acknowledgements too (a poll's answer does not
    // wait for those). A cluster node records its stop in a turn of its own (above).
    if case .singleServer(let durability) = deployment {
      try? await waitUntilDurable(durability.commit.appended)
    }
  }

  /// Suspends until at least `count` polls are parked, or until the calling task is cancelled (then it
  /// returns at once; the caller reads ``parkedPollCount`` to tell which): lets tests and the demo act on a
  /// waiting poll without sleeping, and race the wait against a poll that ends early.
  public func waitForParkedPolls(count: Int) async {
    if parkedPollCount >= count { return }
    let waiterID = nextParkedWaiterID
    nextParkedWaiterID += 1
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        if Task.isCancelled { continuation.resume() } else { parkedWaiters[waiterID] = (count, continuation) }
      }
    } onCancel: {
      Task { await self.endParkedWait(waiterID) }
    }
  }

  private func endParkedWait(_ waiterID: UInt64) {
    parkedWaiters.removeValue(forKey: waiterID)?.continuation.resume()
  }

  /// Suspends until the timer has done its work (heartbeats, sweep) at a time at or after `instant`: lets
  /// tests advance a manual clock past a deadline and then observe the result without sleeping.
  public func waitForTimerFiring(atOrAfter instant: Timestamp) async {
    if let lastTimerFiring, lastTimerFiring >= instant { return }
    await withCheckedContinuation { timerWaiters.append((instant, $0)) }
  }

  // MARK: - Performing actions

  private func pushTokenInvalid(_ token: PushToken) {
    guard case .clusterNode(_, let node) = deployment else {
      machine.pushTokenInvalid(token, now: timeline.now())
      finish([])
      return
    }
    enqueueDecision(
      on: node,
      run: {
        self.machine.pushTokenInvalid(token, now: self.decisionNow())
        self.finish([])
      },
      fail: { _ in }
    )
  }

  /// Ends a poll: its caller (or its ``startPoll(queueID:user:lastEventID:dontBlock:limit:answer:)`` callback)
  /// gets `CancellationError`, its queue stays. Does nothing for a poll already answered.
  public func cancelPoll(_ pollID: PollID) {
    guard case .clusterNode(_, let node) = deployment else {
      finish(machine.pollCancelled(pollID, now: timeline.now()))
      return
    }
    // The poll may still wait for its turn: its caller is answered now, and the turn that parked it (if
    // any) unparks it after.
    endPoll(pollID, with: .cancelled)
    if turnsUnavailable() == nil {
      enqueueDecision(
        on: node,
        run: { self.finish(self.machine.pollCancelled(pollID, now: self.decisionNow())) },
        fail: { _ in }
      )
    }
  }

  private func timerFired() {
    timerDeadline = nil
    // The timer was set for a deadline that has since moved later (``rescheduleTimer()`` keeps it): nothing is
    // due yet, so no decision is taken (on a cluster node it would cost a turn); it is set again.
    if inPlace({ $0.nextDeadline }) > timeline.now() {
      rescheduleTimer()
      return
    }
    guard case .clusterNode(_, let node) = deployment else {
      timerDecided(finish(machine.timerFired(now: timeline.now())), at: timeline.now())
      if let driver = applicationStorage.driver { Task { await driver.runDeadlineIfDue(self) } }
      return
    }
    // A cluster node's heartbeats, sweeps and deadlines are decisions too: taken in a turn, on current state.
    guard node.turns.timerFired() == .enqueue else { return }
    enqueueDecision(
      on: node,
      run: {
        node.turns.timerDecisionEnded()
        let now = self.decisionNow()
        self.timerDecided(self.finish(self.machine.timerFired(now: now)), at: now)
        if let driver = self.applicationStorage.driver { Task { await driver.runDeadlineIfDue(self) } }
      },
      fail: { _ in
        node.turns.timerDecisionEnded()
        self.rescheduleTimer()
      }
    )
  }

  private func timerDecided(_ position: UInt64, at now: Timestamp) {
    lastTimerFiring = now
    let ready = timerWaiters.filter { $0.instant <= now }
    timerWaiters.removeAll { $0.instant <= now }
    for waiter in ready { waiter.continuation.resume() }
  }

  /// Hands what the last input recorded to the log, and performs its actions once the log is durable through
  /// it (at once for a server without a log, or when nothing waits to be written): no answer, and no push,
  /// reveals an effect that a crash could still undo. A single server's poll that only acknowledges waits
  /// for the newest record that decided anything (``GroupCommit/enqueue(_:acknowledgementsOnly:)``), not
  /// for its own acknowledgement: losing that redelivers events the client skips by id.
  /// - Returns: The log position the input's effects need (0 without a log).
  @discardableResult
  func finish(_ actions: [Machine.Action]) -> UInt64 {
    switch deployment {
    case .inMemory:
      perform(actions)
      return 0
    case .singleServer(let durability):
      return record(actions, in: durability, writes: .themselves)
    case .clusterNode(let durability, _):
      return record(actions, in: durability, writes: .inTurns)
    }
  }

  /// Who writes a durable server's records to its log.
  enum RecordWriter {
    /// A single server: the group commit writes them (with a snapshot when one is due), and a poll that
    /// only acknowledges waits for the newest record that decided anything, not for its own.
    case themselves
    /// A cluster node: its turn appends them in the turn's transaction; every answer waits for its own
    /// records (other nodes keep a queue alive by its recorded contact).
    case inTurns
  }

  /// ``finish(_:)`` on a durable server: encodes what the input recorded, enqueues it in the group commit,
  /// and holds `actions` until the log is durable through it.
  private func record(_ actions: [Machine.Action], in durability: Durability, writes: RecordWriter) -> UInt64 {
    let entries = machine.takeRecordedEntries()
    var frames: [Data] = []
    frames.reserveCapacity(entries.count)
    for entry in entries {
      do {
        frames.append(try ServerLogCodec.encode(entry))
      } catch {
        logFailed(error)
        return UInt64.max
      }
    }
    let acknowledgementsOnly =
      writes == .themselves && !entries.isEmpty
      && entries.allSatisfy {
        switch $0.input {
        case .acknowledged, .acknowledgements: true
        default: false
        }
      }
    // Changed in place (a class): the gated list and the pending records are not copied per request.
    let (position, write) = durability.commit.enqueue(frames, acknowledgementsOnly: acknowledgementsOnly)
    durability.snapshotDebt.recorded(count: frames.count, bytes: frames.reduce(0) { $0 + $1.count })
    var snapshotWrite: GroupCommit.Write?
    if writes == .themselves, durability.snapshotDebt.isDue, durability.commit.failure == nil {
      if let bytes = try? durability.encodeSnapshot(machine, durability.commit.appended) {
        durability.snapshotDebt.snapshotTaken(bytes: bytes.count)
        snapshotWrite = durability.commit.enqueueSnapshot(bytes)
      }
    }
    if position <= durability.commit.durable {
      perform(actions)
    } else {
      if !actions.isEmpty {
        durability.gated.append((position, actions))
        if !durability.heldAnswerWaiters.isEmpty { resumeHeldAnswerWaiters(durability) }
      }
      afterActions()
    }
    if writes == .themselves, let next = write ?? snapshotWrite { startWriting(next, to: durability) }
    if !durability.appendWaiters.isEmpty { resumeAppendWaiters(durability) }
    return position
  }

  /// Resumes a poll's caller, if it still waits.
  func endPoll(_ pollID: PollID, with outcome: Machine.PollOutcome) {
    guard let waiter = waiters.removeValue(forKey: pollID) else { return }
    switch waiter {
    case .suspended(let continuation):
      continuation.resume(returning: outcome)
    case .callback(let answer):
      switch outcome {
      case .events(let events): answer(.success(events))
      case .failed(let error): answer(.failure(error))
      case .cancelled:
        if let failure = pollFailures.removeValue(forKey: pollID) {
          answer(.failure(failure))
        } else if let failure = logFailure {
          answer(.failure(failure))
        } else if isShutDown {
          answer(.success([]))
        } else {
          answer(.failure(CancellationError()))
        }
      }
    }
  }

  /// Fails every parked poll with `failure`: a cluster node replaces the machine that parked them.
  func failParkedPolls(with failure: ServerLogError) {
    for pollID in Array(waiters.keys) { endPoll(pollID, failingWith: failure) }
  }

  /// Fails a poll that a cluster node could not take to the log.
  private func endPoll(_ pollID: PollID, failingWith failure: ServerLogError) {
    guard waiters[pollID] != nil else { return }
    pollFailures[pollID] = failure
    endPoll(pollID, with: .cancelled)
  }

  func perform(_ actions: [Machine.Action]) {
    for action in actions {
      switch action {
      case .completePoll(let pollID, let outcome):
        endPoll(pollID, with: outcome)
      case .sendPush(let push):
        Task { [pushGateway] in
          if await pushGateway.send(push) == .tokenInvalid { self.pushTokenInvalid(push.token) }
        }
      }
    }
    afterActions()
  }

  private func afterActions() {
    if !parkedWaiters.isEmpty {
      let parked = inPlace { $0.parkedPollCount }
      let ready = parkedWaiters.filter { $0.value.count <= parked }
      for (waiterID, waiter) in ready {
        parkedWaiters.removeValue(forKey: waiterID)
        waiter.continuation.resume()
      }
    }
    rescheduleTimer()
  }

  /// Reads the machine where it is stored. A plain `machine.property` copies the whole machine (and releases
  /// the copy) in code not specialised for the application: the getter is generic, so the compiler cannot
  /// prove it leaves the actor's storage alone. An `inout` access passes the stored machine's address.
  private func inPlace<Value>(_ read: (inout Machine) -> Value) -> Value { read(&machine) }

  func rescheduleTimer() {
    guard !isShutDown else { return }
    var deadline = inPlace { $0.nextDeadline }
    // After a failed turn, a cluster node's timer waits until turns are tried again.
    if let until = deployment.clusterNode?.turns.refusingUntil { deadline = max(deadline, until) }
    // A timer set for no later than the deadline stays: if it fires before anything is due it sets itself
    // again. Replacing it whenever the deadline moved later (every poll answered moves the earliest heartbeat)
    // started a task and cancelled, and so woke, the sleeping one on every request.
    if let current = timerDeadline, current <= deadline { return }
    timer?.cancel()
    timerDeadline = deadline
    timerTasksStarted += 1
    timer = Task { [timeline, weak self] in
      do {
        try await timeline.sleep(until: deadline)
      } catch {
        return
      }
      await self?.timerFired()
    }
  }
}

extension EventServer where C == ContinuousClock {
  /// Creates a server on the continuous clock, with system randomness.
  public init(application: Application, configuration: EventServerConfiguration = .init()) {
    self.init(application: application, configuration: configuration, clock: ContinuousClock())
  }
}
