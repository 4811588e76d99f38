import EventProtocol
import Foundation

/// How an ``EventServer`` serves a ``StoredApplication``: the steps its requests take instead of the
/// in-memory ones. Built once, where the application's type is known; the server's public requests hand
/// themselves to it.
struct StoredDriver<Application: ServerApplication, C: Clock>: Sendable where C.Duration == Duration {
  typealias Server = EventServer<Application, C>

  let register:
    @Sendable (Server, UserID, Set<String>?, Duration?, ClientID?) async throws(ServerLogError) ->
      Registration<Application.Snapshot>
  let applyMutation: @Sendable (Server, Application.Command, UserID, ClientID, MutationID) async throws -> MutationReceipt
  let handle: @Sendable (Server, Application.Command, UserID) async throws -> Void
  let fetch:
    @Sendable (Server, FetchRequest, QueueID, UserID) async throws(EventAPIError) -> FetchAnswer<Application.FetchedItem>
  let runDeadlineIfDue: @Sendable (Server) async -> Void
}

/// The stored inputs of one server, one at a time: a stored input reads and writes the application's tables
/// and the log in one transaction, so the next must see what it committed.
struct StoredLane {
  var isBusy = false
  var waiters: [CheckedContinuation<Void, Never>] = []
  /// Whether the current input's decision was taken (its records are in its transaction).
  var decided = false
  /// The number of the last input started.
  var step = 0
  /// After a transaction the database did not complete (unreachable, out of time), the inputs waiting behind
  /// it fail at once until then, instead of each waiting for the database's deadline in turn.
  var failFastUntil: Timestamp?
  /// That transaction's failure, answered meanwhile.
  var lastFailure: ServerLogError?
  /// The number of the input whose transaction is open, if one is: a transaction abandoned at its deadline
  /// whose work ends later must not decide on the machine (its number is no longer open).
  var openStep: Int?
}

/// What a command did in its transaction: its events, and the application's next deadline after it.
struct StoredOutcome<Event: EventPayload>: Sendable {
  var deliveries: [Delivery<Event>]
  var nextDeadline: Timestamp?
}

extension EventServer {
  /// Starts a durable server for a stored application: applies its migrations, then recovers the queues
  /// from the log (a snapshot and the records after it; the application's state is already in its tables,
  /// committed with those records), and reads the application's next deadline.
  ///
  /// From then on each registration, command, mutation, fetch and deadline of the application runs in one
  /// database transaction with the log records it decides, one at a time; polls and acknowledgements go
  /// through the group commit as for an in-memory application.
  ///
  /// ```swift
  /// let log = try await SQLiteServerLog.open(path: "data/event-server.sqlite")
  /// let (server, _) = try await EventServer.serving(StoredNoteBoard(), from: log, clock: ContinuousClock())
  /// ```
  /// - Parameters:
  ///   - application: The stored application.
  ///   - log: The database holding the log and the application's tables.
  ///   - configuration: Limits and timings.
  ///   - clock: The clock for heartbeats, expiry, sweeps and the application's deadlines.
  ///   - anchor: The timestamp the clock's current instant stands for; the wall clock's when `nil`.
  ///   - random: The source of queue ids and heartbeat jitter.
  ///   - pushGateway: Where push notifications go.
  ///   - snapshotEvery: How many records between snapshots of the queues.
  /// - Returns: The server, and what the log held.
  /// - Throws: ``MigrationError`` when the migrations are refused or fail; ``ServerLogError`` when the log
  ///   cannot be read or used. Nothing stored is changed by a refusal.
  public static func serving<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog,
    configuration: EventServerConfiguration = .init(),
    clock: C,
    anchor: Timestamp? = nil,
    random: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
    pushGateway: any PushGateway = NoPushGateway(),
    snapshotEvery: Int = 100_000
  ) async throws -> (EventServer, LogRecoveryReport) where Application == StoredRelay<Stored> {
    // The claim is taken by `recovering`; migrations are serialised by the database (the SQLite file's lock,
    // PostgreSQL's advisory lock), and a refused one changes nothing.
    try await log.migrate(application.migrations)
    let (server, report) = try await recovering(
      from: log,
      application: StoredRelay<Stored>(),
      configuration: configuration,
      clock: clock,
      anchor: anchor,
      random: random,
      pushGateway: pushGateway,
      snapshotEvery: snapshotEvery
    )
    await server.install(StoredDriver.serving(application, from: log))
    try await server.readStoredDeadline(application, from: log)
    return (server, report)
  }

  private func install(_ driver: StoredDriver<Application, C>) {
    storedDriver = driver
  }

  /// Whether the server serves a ``StoredApplication``.
  public var servesStoredApplication: Bool { storedDriver != nil }

  private func readStoredDeadline<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog
  ) async throws where Application == StoredRelay<Stored> {
    await acquireStoredLane()
    defer { releaseStoredLane() }
    try await storedStep(on: log) { transaction in
      try await application.nextDeadline(in: transaction)
    } decide: { server, deadline in
      // A deadline replayed from the log ran in its own transaction then: nothing of it is left to run.
      server.machine.updateBookkeeping { relay in
        relay.deadlineDue = nil
        relay.deadline = deadline
      }
      server.rescheduleTimer()
      return ((), 0)
    }
  }

  /// Reads the stored application's tables in one transaction while the server serves, with no other
  /// stored input running: what an operator's report, an admin route or a test compares clients with.
  /// Statements that change the tables are rolled back: a change must be a command, so that its events
  /// reach the queues.
  ///
  /// ```swift
  /// let notes = try await server.readStoredState { transaction in
  ///   try await transaction.execute("SELECT count(*) AS n FROM notes").first?["n"]?.integer
  /// }
  /// ```
  /// - Throws: What `body` threw; ``ServerLogError`` when the server has no stored application or its log
  ///   failed.
  public func readStoredState<Value: Sendable>(
    _ body: @escaping @Sendable (any DatabaseTransaction) async throws -> Value
  ) async throws -> Value {
    guard let log = durability?.log as? any TransactionalServerLog, storedDriver != nil else {
      throw ServerLogError.storage("this server keeps no application state in a database")
    }
    await acquireStoredLane()
    defer { releaseStoredLane() }
    do {
      try await storedStep(on: log) { transaction -> Value in
        // Thrown after the read, so the transaction rolls back whatever the body wrote.
        throw ReadOnly(value: try await body(transaction))
      } decide: { _, _ in ((), 0) }
    } catch let read as ReadOnly<Value> {
      return read.value
    }
    preconditionFailure("readStoredState: the read returned without its value")
  }

  /// Carries a read's value out of the transaction that is rolled back after it.
  private struct ReadOnly<Value: Sendable>: Error {
    var value: Value
  }

  // MARK: - The lane

  func acquireStoredLane() async {
    guard storedLane.isBusy else {
      storedLane.isBusy = true
      return
    }
    await withCheckedContinuation { storedLane.waiters.append($0) }
  }

  func releaseStoredLane() {
    guard !storedLane.waiters.isEmpty else {
      storedLane.isBusy = false
      return
    }
    storedLane.waiters.removeFirst().resume()
  }

  // MARK: - One stored input

  /// Runs one stored input (the caller holds the lane): takes the log's writer once no write is under way,
  /// runs `work` in a transaction, then `decide` on the machine in one step, appends every record waiting
  /// (the input's and any other input's decided meanwhile) in the same transaction, and commits.
  ///
  /// When `work` or `decide` throws, the transaction rolls back, nothing is decided, and the writer goes
  /// on with what waited. When the append or the commit fails after the decision, the log has failed (the
  /// machine is ahead of the database): the server stops, and a restart recovers from what committed.
  /// - Returns: What `decide` returned, once committed.
  @discardableResult
  func storedStep<Work: Sendable, Value: Sendable>(
    on log: any TransactionalServerLog,
    work: @escaping @Sendable (any DatabaseTransaction) async throws -> Work,
    decide: @escaping @Sendable (isolated EventServer, Work) throws -> (Value, UInt64)
  ) async throws -> Value {
    try checkLogHealthy()
    if let until = storedLane.failFastUntil, let failure = storedLane.lastFailure {
      if timeline.now() < until { throw failure }
      storedLane.failFastUntil = nil
    }
    while durability!.commit.isWriting { try await waitUntilWritten() }
    try checkLogHealthy()
    durability!.commit.reserve()
    storedLane.decided = false
    storedLane.step += 1
    let step = storedLane.step
    storedLane.openStep = step
    defer { storedLane.openStep = nil }
    do {
      let (value, position) = try await log.transaction { transaction in
        let worked = try await work(transaction)
        let (value, position, records) = try await self.decideReserved(worked, in: step, decide)
        if !records.isEmpty { try await transaction.append(records) }
        return (value, position)
      }
      writerReleased()
      try await waitUntilDurable(position)
      return value
    } catch {
      guard storedLane.decided else {
        writerReleased()
        // The database refused a statement or could not be reached: nothing was decided, the client may
        // send it again (answered 503 on the wire).
        if let refused = error as? DatabaseError { throw ServerLogError.storage("\(refused)") }
        if let failure = error as? ServerLogError {
          // The database did not complete the transaction: what waits behind it fails at once for a second.
          storedLane.failFastUntil = timeline.now().advanced(by: .seconds(1))
          storedLane.lastFailure = failure
        }
        throw error
      }
      let failure = (error as? ServerLogError) ?? .storage("a stored input's transaction failed to commit: \(error)")
      logFailed(failure)
      throw failure
    }
  }

  private func decideReserved<Work: Sendable, Value: Sendable>(
    _ work: Work,
    in step: Int,
    _ decide: @Sendable (isolated EventServer, Work) throws -> (Value, UInt64)
  ) throws -> (Value, UInt64, [StoredRecord]) {
    guard storedLane.openStep == step else {
      throw ServerLogError.storage("the input's transaction was abandoned at its deadline")
    }
    let (value, position) = try decide(self, work)
    storedLane.decided = true
    return (value, position, durability!.commit.gatherReserved())
  }

  /// The reserved write ended (committed, or rolled back with nothing decided): what waited is written next.
  private func writerReleased() {
    let next = durability!.commit.writeSucceeded()
    releaseDurable()
    if let next { startWriting(next) }
  }

  // MARK: - Requests

  func storedRegister<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog,
    user: UserID,
    eventTypes: Set<String>?,
    lifespan: Duration?,
    clientID: ClientID?
  ) async throws(ServerLogError) -> Registration<Stored.Snapshot?> where Application == StoredRelay<Stored> {
    await acquireStoredLane()
    defer { releaseStoredLane() }
    do {
      return try await storedStep(on: log) { transaction in
        try await application.snapshot(for: user, in: transaction)
      } decide: { server, snapshot in
        // The snapshot was read with no other stored input running: the queue starts right after it.
        server.machine.updateBookkeeping { $0.stagedSnapshot = snapshot }
        defer { server.machine.updateBookkeeping { $0.stagedSnapshot = nil } }
        let (registration, actions) = server.machine.register(
          user: user,
          eventTypes: eventTypes,
          lifespan: lifespan,
          clientID: clientID,
          now: server.decisionNow()
        )
        return (registration, server.finish(actions))
      }
    } catch let error as ServerLogError {
      throw error
    } catch {
      throw .storage("the registration's snapshot could not be read: \(error)")
    }
  }

  func storedMutation<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog,
    command: Application.Command,
    user: UserID,
    clientID: ClientID,
    mutationID: MutationID
  ) async throws -> MutationReceipt where Application == StoredRelay<Stored> {
    try checkLogHealthy()
    guard let request = command.request else { throw EventAPIError.badRequest(Self.reservedKeyRefusal) }
    let (digest, commandBytes) = MutationDigest.measuring(command)
    if let problem = machine.mutationProblem(clientID: clientID, mutationID: mutationID, commandBytes: commandBytes) {
      throw problem
    }
    await acquireStoredLane()
    defer { releaseStoredLane() }
    let source = MutationSource(user: user, clientID: clientID)
    guard machine.mutationMemory.verdict(for: source, mutationID: mutationID, digest: digest) == .new else {
      // A repeat or a reused id: answered from the mutation memory, as for an in-memory application.
      return try await decideMutation(command, user: user, clientID: clientID, mutationID: mutationID, digest: digest)
    }
    let now = decisionNow()
    do {
      return try await storedStep(on: log) { transaction in
        StoredOutcome(
          deliveries: try await application.handle(request, from: user, at: now, in: transaction),
          nextDeadline: try await application.nextDeadline(in: transaction)
        )
      } decide: { server, outcome in
        server.stageDeadline(outcome.nextDeadline, of: Stored.self)
        let (receipt, actions) = try server.machine.applyMutation(
          .delivered(outcome.deliveries),
          from: user,
          clientID: clientID,
          mutationID: mutationID,
          digest: digest,
          now: server.decisionNow()
        )
        return (receipt, server.finish(actions))
      }
    } catch let rejection as CommandRejection {
      // Its changes rolled back; the refusal is a decision, remembered for repeats, durable before answered.
      return try await decideMutation(
        .rejected(rejection.reason),
        user: user,
        clientID: clientID,
        mutationID: mutationID,
        digest: digest
      )
    }
  }

  func storedHandle<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog,
    command: Application.Command,
    user: UserID
  ) async throws where Application == StoredRelay<Stored> {
    try checkLogHealthy()
    guard let request = command.request else { throw EventAPIError.badRequest(Self.reservedKeyRefusal) }
    await acquireStoredLane()
    defer { releaseStoredLane() }
    let now = decisionNow()
    do {
      try await storedStep(on: log) { transaction in
        StoredOutcome(
          deliveries: try await application.handle(request, from: user, at: now, in: transaction),
          nextDeadline: try await application.nextDeadline(in: transaction)
        )
      } decide: { server, outcome in
        server.stageDeadline(outcome.nextDeadline, of: Stored.self)
        let actions = try server.machine.handle(.delivered(outcome.deliveries), from: user, now: server.decisionNow())
        return ((), server.finish(actions))
      }
    } catch let rejection as CommandRejection {
      throw EventAPIError.badRequest(rejection.reason)
    }
  }

  func storedFetch<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog,
    request: FetchRequest,
    queueID: QueueID,
    user: UserID
  ) async throws(EventAPIError) -> FetchAnswer<Stored.FetchedItem> where Application == StoredRelay<Stored> {
    // Refused before the database is asked when the queue or the request is wrong.
    _ = try machine.fetchableQueue(queueID, user: user, request: request, now: timeline.now())
    await acquireStoredLane()
    defer { releaseStoredLane() }
    do {
      return try await storedStep(on: log) { transaction in
        try await application.fetch(request, for: user, in: transaction)
      } decide: { server, page in
        // Read with no other stored input running: atomic with the queue's last event id read now.
        server.machine.updateBookkeeping { $0.stagedPage = page }
        defer { server.machine.updateBookkeeping { $0.stagedPage = nil } }
        return (try server.machine.fetch(request, queueID: queueID, user: user, now: server.timeline.now()), 0)
      }
    } catch let error as EventAPIError {
      throw error
    } catch let rejection as CommandRejection {
      throw .badRequest(rejection.reason)
    } catch {
      throw .serviceUnavailable("the page could not be read: \(error)", retryAfter: .seconds(1))
    }
  }

  func storedDeadlineIfDue<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog
  ) async where Application == StoredRelay<Stored> {
    guard machine.application.deadlineDue != nil, !isShuttingDown else { return }
    await acquireStoredLane()
    defer { releaseStoredLane() }
    guard machine.application.deadlineDue != nil else { return }
    machine.updateBookkeeping { $0.deadlineDue = nil }
    let now = decisionNow()
    do {
      try await storedStep(on: log) { transaction in
        StoredOutcome(
          deliveries: try await application.deadlineReached(at: now, in: transaction),
          nextDeadline: try await application.nextDeadline(in: transaction)
        )
      } decide: { server, outcome in
        server.stageDeadline(outcome.nextDeadline, of: Stored.self)
        return ((), server.finish(server.machine.deadlineDecided(.delivered(outcome.deliveries), now: server.decisionNow())))
      }
    } catch {
      // Rolled back: tried again a second later (the database may be back by then).
      if logFailure == nil { stageDeadline(now.advanced(by: .seconds(1)), of: Stored.self) }
    }
  }

  private func stageDeadline<Stored: StoredApplication>(_ deadline: Timestamp?, of _: Stored.Type)
  where Application == StoredRelay<Stored> {
    machine.updateBookkeeping { $0.deadline = deadline }
    rescheduleTimer()
  }

  static var reservedKeyRefusal: String {
    "a command may not carry the key \"$stored\": it is reserved for the server's log"
  }
}

extension StoredDriver {
  /// The steps of a server serving `application` from `log`.
  static func serving<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog
  ) -> StoredDriver where Application == StoredRelay<Stored> {
    StoredDriver(
      register: { (server, user, eventTypes, lifespan, clientID) throws(ServerLogError) in
        try await server.storedRegister(
          application,
          from: log,
          user: user,
          eventTypes: eventTypes,
          lifespan: lifespan,
          clientID: clientID
        )
      },
      applyMutation: { server, command, user, clientID, mutationID in
        try await server.storedMutation(
          application,
          from: log,
          command: command,
          user: user,
          clientID: clientID,
          mutationID: mutationID
        )
      },
      handle: { server, command, user in
        try await server.storedHandle(application, from: log, command: command, user: user)
      },
      fetch: { (server, request, queueID, user) throws(EventAPIError) in
        try await server.storedFetch(application, from: log, request: request, queueID: queueID, user: user)
      },
      runDeadlineIfDue: { server in await server.storedDeadlineIfDue(application, from: log) }
    )
  }
}
