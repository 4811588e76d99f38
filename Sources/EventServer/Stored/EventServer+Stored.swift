import EventProtocol
import Foundation

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
  /// database transaction with the log records it decides, one after another (waiting inputs share a
  /// transaction, each under its own savepoint); polls and acknowledgements go
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
  ///   - snapshots: When the server writes a snapshot of the queues by itself.
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
    snapshots: SnapshotSchedule = .byWork
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
      snapshots: snapshots
    )
    try await server.startServing(application, from: log)
    return (server, report)
  }

  /// Starts a cluster node for a stored application on a log several nodes share (PostgreSQL): applies the
  /// migrations (once across nodes starting together), joins the cluster, and reads the application's next
  /// deadline. Every node reads and writes the same tables; a node runs its stored inputs in its turns,
  /// holding the log's append lock after applying what the others committed, so each input sees every
  /// input decided before it on any node, and a registration's snapshot is atomic with its queue on every
  /// node.
  ///
  /// ```swift
  /// let log = try await PostgresServerLog.connect(url: url, logger: logger)
  /// let (node, _) = try await EventServer.joining(StoredNoteBoard(), on: log, clock: ContinuousClock())
  /// ```
  /// - Throws: ``MigrationError`` when the migrations are refused or fail; ``ServerLogError`` when the log
  ///   cannot be read or used.
  public static func joining<Stored: StoredApplication>(
    _ application: Stored,
    on log: any TransactionalSharedLog,
    configuration: EventServerConfiguration = .init(),
    clock: C,
    anchor: Timestamp? = nil,
    random: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
    pushGateway: any PushGateway = NoPushGateway(),
    replication: ReplicationSettings = .init()
  ) async throws -> (EventServer, LogRecoveryReport) where Application == StoredRelay<Stored> {
    try await log.migrate(application.migrations)
    let (server, report) = try await joining(
      log,
      application: StoredRelay<Stored>(),
      configuration: configuration,
      clock: clock,
      anchor: anchor,
      random: random,
      pushGateway: pushGateway,
      replication: replication
    )
    try await server.startServing(application, from: log)
    return (server, report)
  }

  /// From now on the server's requests run as `application`'s stored inputs on `log`; starts by reading its
  /// next deadline.
  private func startServing<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog
  ) async throws where Application == StoredRelay<Stored> {
    applicationStorage = .inTables(StoredDriver.serving(application, from: log))
    try await readStoredDeadline(application, from: log, starting: true)
  }

  /// Whether the server serves a ``StoredApplication``.
  public var servesStoredApplication: Bool { applicationStorage.driver != nil }

  /// Reads the application's next deadline and schedules it. At start (`starting`), a deadline due but not
  /// run is dropped: one replayed from the log ran in its own transaction then, and nothing of it is left to
  /// run; a later look leaves a due deadline to run.
  func readStoredDeadline<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog,
    starting: Bool
  ) async throws where Application == StoredRelay<Stored> {
    try await runStored(on: log) { transaction in
      try await application.nextDeadline(in: transaction)
    } decide: { server, deadline in
      let next = try deadline.get()
      if starting { server.machine.updateBookkeeping { $0.deadlineDue = nil } }
      server.stageDeadline(next, of: Stored.self)
    }
  }

  /// Reads the stored application's tables in one transaction while the server serves, in order with the
  /// application's inputs (it sees every input decided before it, none after): what an operator's report,
  /// an admin route or a test compares clients with. Statements that change the tables are rolled back: a
  /// change must be a command, so that its events reach the queues.
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
    guard case .inTables(let driver) = applicationStorage else {
      throw ServerLogError.storage("this server keeps no application state in a database")
    }
    let log = driver.log
    return try await runStored(on: log, readsSnapshot: true) { transaction -> Value in
      // Thrown after the read, so its savepoint rolls back whatever the body wrote.
      throw ReadOnly(value: try await body(transaction))
    } decide: { _, read in
      switch read {
      case .success(let value): return value
      case .failure(let error as ReadOnly<Value>): return error.value
      case .failure(let error): throw error
      }
    }
  }

  /// Changes the stored application's tables where no client needs to hear of it: bookkeeping, such as
  /// forgetting the blobs a janitor has deleted. It runs in order with the application's inputs and commits
  /// with them, but it is not an input: it reaches no queue and leaves no record in the log (the in-memory
  /// counterpart is ``updateBookkeeping(_:)``). A change clients must see is a command.
  ///
  /// ```swift
  /// try await server.writeStoredBookkeeping { transaction in
  ///   try await transaction.execute("DELETE FROM blob_deletions WHERE blob_key = ?", [.text("videos/v1")])
  /// }
  /// ```
  /// - Returns: What `body` returned, once committed.
  /// - Throws: What `body` threw (its writes rolled back); ``ServerLogError`` when the server has no stored
  ///   application or its log failed.
  @discardableResult
  public func writeStoredBookkeeping<Value: Sendable>(
    _ body: @escaping @Sendable (any DatabaseTransaction) async throws -> Value
  ) async throws -> Value {
    guard case .inTables(let driver) = applicationStorage else {
      throw ServerLogError.storage("this server keeps no application state in a database")
    }
    let log = driver.log
    return try await runStored(on: log, work: body) { _, wrote in try wrote.get() }
  }

  /// Carries a read's value out of the savepoint that is rolled back after it.
  private struct ReadOnly<Value: Sendable>: Error {
    var value: Value
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
    do {
      return try await runStored(on: log, readsSnapshot: true) { transaction in
        try await application.snapshot(for: user, in: transaction)
      } decide: { server, read in
        // Read after every input decided before it and before any after it: the queue starts right after it.
        let snapshot = try read.get()
        server.machine.updateBookkeeping { $0.stagedSnapshot = snapshot }
        defer { server.machine.updateBookkeeping { $0.stagedSnapshot = nil } }
        let (registration, actions) = server.machine.register(
          user: user,
          eventTypes: eventTypes,
          lifespan: lifespan,
          clientID: clientID,
          now: server.decisionNow()
        )
        server.finish(actions)
        return registration
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
    let step = try storedMutationStep(
      application,
      command: command,
      user: user,
      clientID: clientID,
      mutationID: mutationID
    )
    return try await runStored(on: log, work: step.work, decide: step.decide)
  }

  /// A batch of one device's mutations, decided in order as consecutive stored inputs: they share their
  /// transactions (one commit for up to ``StoredBatches/maximumBatch``), each under its own savepoint, as
  /// ``EventServerStateMachine/applyMutations(_:measured:from:now:)`` decides them in memory (stopping
  /// after a reused id, and after a write that failed undecided, so that no later write of the device is
  /// decided before it).
  /// - Returns: One outcome per mutation decided, in order.
  /// - Throws: ``ServerLogError`` when a write failed undecided or the log failed (what was acknowledged
  ///   before stays so; the client sends the batch again and meets those answers from the mutation memory).
  func storedMutations<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog,
    requests: [(mutation: Application.Command, clientID: ClientID, mutationID: MutationID)],
    user: UserID
  ) async throws -> [MutationOutcome] where Application == StoredRelay<Stored> {
    var outcomes: [MutationOutcome?] = Array(repeating: nil, count: requests.count)
    var steps: [StoredStep<StoredOutcome<Stored.Event>?, MutationReceipt>] = []
    var stepRequests: [Int] = []
    for (index, request) in requests.enumerated() {
      do {
        steps.append(
          try storedMutationStep(
            application,
            command: request.mutation,
            user: user,
            clientID: request.clientID,
            mutationID: request.mutationID
          )
        )
        stepRequests.append(index)
      } catch {
        outcomes[index] = .refused(request.mutationID, error)
      }
    }
    // A reused id ends the batch, as in memory; so does a write that failed without a decision (its
    // database refused a statement): the writes after it wait for its retry, in the device's order.
    let decided = try await runStoredInOrder(on: log, steps) { decision in
      switch decision {
      case .success: false
      case .failure(let refusal as EventAPIError): refusal.code == .mutationIDReused
      case .failure: true
      }
    }
    for (step, decision) in decided.enumerated() {
      let index = stepRequests[step]
      let mutationID = requests[index].mutationID
      switch decision {
      case nil: continue
      case .success(let receipt)?: outcomes[index] = .acknowledged(mutationID, receipt)
      case .failure(let refusal as EventAPIError)?: outcomes[index] = .refused(mutationID, refusal)
      case .failure(let error)?: throw error
      }
    }
    var answered: [MutationOutcome] = []
    for outcome in outcomes {
      guard let outcome else { break }
      answered.append(outcome)
      if case .refused(_, let refusal) = outcome, refusal.code == .mutationIDReused { break }
    }
    return answered
  }

  /// One mutation as a stored input: answered from the mutation memory when it is a repeat, else handled by
  /// the application in the transaction; its decision (acceptance or refusal) recorded on the machine.
  /// - Throws: `BAD_REQUEST` (``EventAPIError``) for a mutation refused before the database is asked.
  private func storedMutationStep<Stored: StoredApplication>(
    _ application: Stored,
    command: Application.Command,
    user: UserID,
    clientID: ClientID,
    mutationID: MutationID
  ) throws(EventAPIError) -> StoredStep<StoredOutcome<Stored.Event>?, MutationReceipt>
  where Application == StoredRelay<Stored> {
    guard let request = command.request else { throw EventAPIError.badRequest(Self.reservedKeyRefusal) }
    let (digest, commandBytes) = MutationDigest.measuring(command)
    if let problem = machine.mutationProblem(clientID: clientID, mutationID: mutationID, commandBytes: commandBytes) {
      throw problem
    }
    let source = MutationSource(user: user, clientID: clientID)
    let now = decisionNow()
    let route = partitionRoute()
    return StoredStep { transaction -> StoredOutcome<Stored.Event>? in
      // A repeat or a reused id is answered from the mutation memory, without the application.
      guard await self.isNewMutation(source, mutationID: mutationID, digest: digest) else { return nil }
      return StoredOutcome(
        deliveries: try await Self.routed(
          try await application.handle(request, from: user, at: now, in: transaction),
          by: route,
          author: user,
          in: transaction
        ),
        nextDeadline: try await application.nextDeadline(in: transaction)
      )
    } decide: { server, worked in
      let decision: Application.Command
      switch worked {
      case .success(nil):
        decision = command
      case .success(let outcome?):
        server.stageDeadline(outcome.nextDeadline, of: Stored.self)
        decision = .delivered(outcome.deliveries)
      case .failure(let rejection as CommandRejection):
        // Its writes roll back; the refusal is a decision, remembered for repeats, committed before answered.
        decision = .rejected(rejection.reason)
      case .failure(let error):
        throw error
      }
      let now = server.decisionNow()
      do throws(EventAPIError) {
        let (receipt, actions) = try server.machine.applyMutation(
          decision,
          from: user,
          clientID: clientID,
          mutationID: mutationID,
          digest: digest,
          now: now
        )
        server.finish(actions)
        return receipt
      } catch {
        server.finish([])
        throw error
      }
    }
  }

  /// Whether a mutation is new to the mutation memory now (not a repeat, not a reused id).
  private func isNewMutation(_ source: MutationSource, mutationID: MutationID, digest: MutationDigest) -> Bool {
    machine.mutationMemory.verdict(for: source, mutationID: mutationID, digest: digest) == .new
  }

  func storedHandle<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog,
    command: Application.Command,
    user: UserID
  ) async throws where Application == StoredRelay<Stored> {
    guard let request = command.request else { throw EventAPIError.badRequest(Self.reservedKeyRefusal) }
    let now = decisionNow()
    let route = partitionRoute()
    try await runStored(on: log) { transaction in
      StoredOutcome(
        deliveries: try await Self.routed(
          try await application.handle(request, from: user, at: now, in: transaction),
          by: route,
          author: user,
          in: transaction
        ),
        nextDeadline: try await application.nextDeadline(in: transaction)
      )
    } decide: { server, worked in
      let outcome: StoredOutcome<Stored.Event>
      do {
        outcome = try worked.get()
      } catch let rejection as CommandRejection {
        throw EventAPIError.badRequest(rejection.reason)
      }
      server.stageDeadline(outcome.nextDeadline, of: Stored.self)
      server.finish(try server.machine.handle(.delivered(outcome.deliveries), from: user, now: server.decisionNow()))
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
    do {
      return try await runStored(on: log, readsSnapshot: true) { transaction in
        try await application.fetch(request, for: user, in: transaction)
      } decide: { server, read in
        let page: FetchPage<Stored.FetchedItem>
        do {
          page = try read.get()
        } catch let rejection as CommandRejection {
          throw EventAPIError.badRequest(rejection.reason)
        }
        // Read in order with the inputs: atomic with the queue's last event id read now.
        server.machine.updateBookkeeping { $0.stagedPage = page }
        defer { server.machine.updateBookkeeping { $0.stagedPage = nil } }
        return try server.machine.fetch(request, queueID: queueID, user: user, now: server.timeline.now())
      }
    } catch let error as EventAPIError {
      throw error
    } catch {
      throw .serviceUnavailable("the page could not be read: \(error)", retryAfter: .seconds(1))
    }
  }

  func storedDeadlineIfDue<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog
  ) async where Application == StoredRelay<Stored> {
    guard let due = machine.application.deadlineDue, !isShuttingDown else { return }
    machine.updateBookkeeping { $0.deadlineDue = nil }
    let route = partitionRoute()
    do {
      try await runStored(on: log) { transaction in
        StoredOutcome(
          deliveries: try await Self.routed(
            try await application.deadlineReached(at: due, in: transaction),
            by: route,
            author: nil,
            in: transaction
          ),
          nextDeadline: try await application.nextDeadline(in: transaction)
        )
      } decide: { server, worked in
        let outcome = try worked.get()
        server.stageDeadline(outcome.nextDeadline, of: Stored.self)
        server.finish(server.machine.deadlineDecided(.delivered(outcome.deliveries), now: server.decisionNow()))
      }
    } catch {
      // Rolled back: tried again a second later (the database may be back by then).
      if logFailure == nil { stageDeadline(timeline.now().advanced(by: .seconds(1)), of: Stored.self) }
    }
  }

  /// Schedules the application's next deadline, as it said in its last transaction.
  ///
  /// On a partitioned log, only partition 0's node runs the application's deadlines (their deliveries reach
  /// the other partitions' users through their inboxes, as a command's do): were every partition's node to
  /// run them, two could find the same due rows at once and deliver their events twice. A command on
  /// another partition may set an earlier deadline than partition 0's node knows, so that node reads the
  /// next deadline again at least every follow interval (``lookForStoredDeadline()``): a deadline set on
  /// another partition runs at most about that late.
  private func stageDeadline<Stored: StoredApplication>(_ deadline: Timestamp?, of _: Stored.Type)
  where Application == StoredRelay<Stored> {
    let runsDeadlines = partitionRoute().map { $0.home == 0 } ?? true
    machine.updateBookkeeping { $0.deadline = runsDeadlines ? deadline : nil }
    rescheduleTimer()
  }

  /// Partition 0's node of a partitioned log reads the stored application's next deadline again (called by
  /// its follower at least every follow interval): another partition's command may have set an earlier one.
  /// One look at a time; a look that fails is the next one's to make.
  func lookForStoredDeadline() async {
    guard case .inTables(let driver) = applicationStorage, case .clusterNode(_, let node) = deployment,
      let route = partitionRoute(), route.home == 0, !isShuttingDown, !node.deadlineLookUnderWay
    else { return }
    node.deadlineLookUnderWay = true
    defer { node.deadlineLookUnderWay = false }
    try? await driver.readDeadline(self)
  }

  /// How this node splits deliveries between its partition and the others, when it serves one partition of
  /// several (``PartitionedSharedLog``); `nil` otherwise.
  func partitionRoute() -> PartitionRoute? {
    guard let log = deployment.clusterNode?.log.partition, log.partitions.count > 1 else { return nil }
    let byUser: @Sendable (UserID) -> String = { $0.rawValue }
    return PartitionRoute(
      map: log.partitions,
      home: log.partitionIndex,
      partitionKey: applicationStorage.driver?.partitionKey ?? byUser
    )
  }

  /// `deliveries` for this partition's users; those for other partitions' users sent to their inboxes in
  /// `transaction` (all of them kept when `route` is `nil`).
  nonisolated static func routed<Event: EventPayload>(
    _ deliveries: [Delivery<Event>],
    by route: PartitionRoute?,
    author: UserID?,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<Event>] {
    guard let route else { return deliveries }
    return try await route.send(deliveries, author: author, in: transaction)
  }

  /// Delivers messages from other partitions' commands to this partition's queues, each recorded as an
  /// input of this partition's log (in the turn that takes them from the inbox).
  /// - Throws: ``ServerLogError/undecodable(_:)`` for a message this build cannot read (the turn fails and
  ///   the messages stay in the inbox).
  func receivePartitionMessages<Stored: StoredApplication>(
    _ messages: [Data],
    of _: Stored.Type
  ) throws(ServerLogError) where Application == StoredRelay<Stored> {
    for bytes in messages {
      let message: PartitionMessage<Stored.Event>
      do {
        message = try JSONDecoder().decode(PartitionMessage<Stored.Event>.self, from: bytes)
      } catch {
        throw .undecodable("a message from another partition: \(error)")
      }
      let now = decisionNow()
      if let author = message.author {
        do {
          finish(try machine.handle(.delivered(message.deliveries), from: author, now: now))
        } catch {
          throw .storage("a message from another partition could not be delivered: \(error)")
        }
      } else {
        finish(machine.deadlineDecided(.delivered(message.deliveries), now: now))
      }
    }
  }

  static var reservedKeyRefusal: String {
    "a command may not carry the key \"$stored\": it is reserved for the server's log"
  }
}
