import EventServer
import Logging
import PostgresNIO
import Synchronization

/// A node's leases on partitions of a ``PostgresServerLog``: PostgreSQL advisory locks held by one database
/// session of the node's own.
///
/// A lease is `pg_try_advisory_lock` on the partition's key: held until the node lets it go or its session
/// ends. When the node dies (SIGKILL, a crash, a lost network), PostgreSQL ends the session and releases
/// every lock it held, so the partitions are free for the other nodes at their next look, with nothing for
/// anyone to clean up. Opening the leases also takes a shared lock that marks the node alive, which is how
/// ``survey()`` counts the nodes.
///
/// The session is asked at least every quarter of the confirmation bound (4/5 of the log's operation
/// timeout), so that a session that falls silent is given up at the operation timeout even while the node
/// asks nothing else; ``holdsLeases`` tells whether its last answer is within the bound (what a host may
/// consult; `PartitionHost` does not yet).
///
/// Leases decide who serves a partition, not what is correct: a node that lost its lease without knowing yet
/// still appends only in turns under the partition's counter row, after applying what others committed, so
/// two nodes serving one partition for a moment cost work, never a wrong answer.
///
/// ```swift
/// let leases = try await PartitionLeases.open(on: log)
/// let survey = try await leases.survey()
/// let plan = PartitionLeasePlan(partitions: log.partitions.count, liveNodes: survey.liveNodes,
///                               mine: survey.mine, heldByOthers: survey.heldByOthers, rotation: 0)
/// for partition in plan.acquire { _ = try await leases.tryAcquire(partition) }
/// ```
public final class PartitionLeases: Sendable {
  /// The advisory lock key of partition `p` is this plus `p` (the high 32 bits name the kind of lock).
  static var leaseKeyBase: Int64 { 0x6576_5074_0000_0000 }
  /// The shared advisory lock every node holding leases holds: the live nodes.
  static var nodeKey: Int64 { 0x6576_4E64_0000_0000 }

  private enum Request: Sendable {
    case acquire(Int, CheckedContinuation<Result<Bool, ServerLogError>, Never>)
    case release(Int, CheckedContinuation<Result<Bool, ServerLogError>, Never>)
    case survey(CheckedContinuation<Result<LeaseSurvey, ServerLogError>, Never>)
    case advertise(String, polls: String?, CheckedContinuation<Result<Bool, ServerLogError>, Never>)
    /// Every lock of the session: the leases and the node's own.
    case releaseAll(CheckedContinuation<Result<Bool, ServerLogError>, Never>)
    /// Nothing but an answer: the session still lives.
    case confirm(CheckedContinuation<Result<Bool, ServerLogError>, Never>)
    /// A notification on the lease channel, that the others look now.
    case announce(CheckedContinuation<Result<Bool, ServerLogError>, Never>)

    /// What is asked, for a log line.
    var name: String {
      switch self {
      case .acquire: "acquire"
      case .release: "release"
      case .survey: "survey"
      case .advertise: "advertise"
      case .releaseAll: "release all"
      case .confirm: "confirm"
      case .announce: "announce"
      }
    }

    func fail(_ error: ServerLogError) {
      switch self {
      case .acquire(_, let continuation), .release(_, let continuation), .advertise(_, _, let continuation),
        .releaseAll(let continuation), .confirm(let continuation), .announce(let continuation):
        continuation.resume(returning: .failure(error))
      case .survey(let continuation): continuation.resume(returning: .failure(error))
      }
    }
  }

  private struct State: Sendable {
    var held: Set<Int> = []
    var lost: ServerLogError?
    /// Until when the session's last answer lets the node serve its leases.
    var confirmation: LeaseConfirmation<ContinuousClock.Instant>
    /// Where the session's open stands: what an abandoned open ends, and what the session looks at before
    /// it waits for the node lock.
    var opening: Opening = .connecting
    /// Asks the session regularly, so that its silence is noticed within the bound.
    var confirming: Task<Void, Never>?
  }

  /// Where a lease session's open stands. The open's deadline and the session's task race: the session
  /// records its backend before it waits for the node lock, and the open, giving up, marks it abandoned, in
  /// one lock each, so either the open sees the backend (and ends it) or the session sees the open gone
  /// (and never waits for the lock): an abandoned session never takes the node lock later.
  private enum Opening: Sendable {
    /// Not connected yet, or its backend not known.
    case connecting
    /// Connected, on this backend: it may be waiting for the node lock.
    case connected(connection: PostgresConnection, pid: Int32)
    /// The open gave up at its deadline.
    case abandoned
  }

  /// The state, shared with the task holding the session (which marks the leases lost when it ends).
  private final class SharedState: Sendable {
    let mutex: Mutex<State>

    init(confirmationBound: Duration) {
      mutex = Mutex(State(confirmation: LeaseConfirmation(bound: confirmationBound)))
    }

    func markLost(_ error: ServerLogError) {
      mutex.withLock {
        $0.held = []
        $0.confirmation.lost()
        if $0.lost == nil { $0.lost = error }
      }
    }

    /// The session answered a request sent at `askedAt`: the leases hold for the bound from then, unless
    /// they were lost meanwhile.
    func confirm(askedAt: ContinuousClock.Instant) {
      mutex.withLock {
        if $0.lost == nil { $0.confirmation.answered(askedAt: askedAt) }
      }
    }
  }

  /// How long an answer of the session confirms the leases (``LeaseConfirmation/bound``) on a log whose
  /// operations must end within `operationTimeout`: four fifths of it, so that the node stops serving before
  /// it gives the session up, and before the database (whose `tcp_user_timeout` is at least the operation
  /// timeout) releases the leases.
  public static func confirmationBound(operationTimeout: Duration) -> Duration {
    operationTimeout / 5 * 4
  }

  private let state: SharedState
  private let requests: AsyncStream<Request>.Continuation
  private let session: Task<Void, Never>
  /// The task running the session's own client: cancelled, it closes the session's connection.
  private let client: Task<Void, Never>
  /// How many partitions the log has.
  public let partitions: PartitionMap
  private let location: String
  private let operationTimeout: Duration

  private init(
    state: SharedState,
    requests: AsyncStream<Request>.Continuation,
    session: Task<Void, Never>,
    client: Task<Void, Never>,
    partitions: PartitionMap,
    location: String,
    operationTimeout: Duration
  ) {
    self.state = state
    self.requests = requests
    self.session = session
    self.client = client
    self.partitions = partitions
    self.location = location
    self.operationTimeout = operationTimeout
  }

  /// Opens a session of its own on `log`'s database and marks this node alive in it.
  /// - Parameters:
  ///   - log: Partition 0 of the log (or its only partition).
  ///   - confirmationBound: How long an answer of the session lets the node serve its leases
  ///     (``holdsLeases``); by default ``confirmationBound(operationTimeout:)`` of the log's. Shorter than
  ///     the log's operation timeout and than the database's `tcp_user_timeout`.
  /// - Throws: ``ServerLogError/storage(_:)`` when the database cannot be reached in time.
  public static func open(
    on log: PostgresServerLog,
    confirmationBound: Duration? = nil
  ) async throws(ServerLogError) -> PartitionLeases {
    let (stream, requests) = AsyncStream.makeStream(of: Request.self)
    let (opened, open) = AsyncStream.makeStream(of: Result<Int32, ServerLogError>.self)
    // A client of its own, made for this session: the lease session never waits behind the nodes' work for
    // a connection, nor gets one of theirs that died with a database restart (a session on a dead
    // connection never answers, and then no node would serve again after PostgreSQL came back).
    var configuration = log.clientConfiguration
    configuration.options.maximumConnections = 1
    let client = PostgresClient(configuration: configuration, backgroundLogger: log.logger)
    let running = PostgresServerLog.runDetached(client)
    let logger = log.logger
    let location = log.location
    let survey = Self.surveyQuery
    let began = ContinuousClock.now
    let bound = confirmationBound ?? Self.confirmationBound(operationTimeout: log.operationTimeout)
    let state = SharedState(confirmationBound: bound)
    let session = Task {
      var failure = ServerLogError.storage("\(location): the session holding the partition leases ended")
      do {
        try await client.withConnection { connection in
          // The backend first, then the node lock (which may wait): an open abandoned while it waits ends
          // this backend, which would otherwise take the lock later and hold it with no node behind it.
          var pid: Int32 = 0
          for try await value in try await connection.query("SELECT pg_backend_pid()", logger: logger)
            .decode(Int32.self)
          {
            pid = value
          }
          let abandoned = state.mutex.withLock { [pid] state in
            guard case .connecting = state.opening else { return true }
            state.opening = .connected(connection: connection, pid: pid)
            return false
          }
          // The open gave up before this backend was recorded: it must not wait for the node lock.
          if abandoned { throw CancellationError() }
          try await connection.query("SELECT pg_advisory_lock_shared(\(Self.nodeKey))", logger: logger)
          try await Self.addPollAddressColumn(on: connection, logger: logger)
          try await Self.register(on: connection, logger: logger)
          open.yield(.success(pid))
          for await request in stream {
            let began = ContinuousClock.now
            defer {
              let took = began.duration(to: .now)
              if took > .seconds(1) {
                logger.warning("a lease query was slow", metadata: ["request": "\(request.name)", "took": "\(took)"])
              }
            }
            do {
              switch request {
              case .acquire(let partition, let continuation):
                let key = Self.leaseKeyBase + Int64(partition)
                let taken = try await PostgresServerLog.bool(
                  "SELECT pg_try_advisory_lock(\(key))",
                  on: connection,
                  logger: logger
                )
                continuation.resume(returning: .success(taken))
              case .release(let partition, let continuation):
                let key = Self.leaseKeyBase + Int64(partition)
                let released = try await PostgresServerLog.bool(
                  "SELECT pg_advisory_unlock(\(key))",
                  on: connection,
                  logger: logger
                )
                continuation.resume(returning: .success(released))
              case .survey(let continuation):
                continuation.resume(returning: .success(try await survey(connection, pid, logger)))
              case .releaseAll(let continuation):
                try await connection.query("SELECT pg_advisory_unlock_all()", logger: logger)
                continuation.resume(returning: .success(true))
              case .confirm(let continuation):
                try await connection.query("SELECT 1", logger: logger)
                continuation.resume(returning: .success(true))
              case .announce(let continuation):
                try await connection.query(
                  "SELECT pg_notify(\(PostgresServerLog.leaseChannel), '')",
                  logger: logger
                )
                continuation.resume(returning: .success(true))
              case .advertise(let address, let pollAddress, let continuation):
                // The session's own row, recorded when it opened (``register(on:logger:)``).
                try await connection.query(
                  """
                  UPDATE partition_node SET address = \(address), poll_address = \(pollAddress)
                  WHERE pid = pg_backend_pid()
                  """,
                  logger: logger
                )
                continuation.resume(returning: .success(true))
              }
            } catch {
              let ended = ServerLogError.storage(
                "\(location): the session holding the partition leases ended: \(String(reflecting: error))"
              )
              state.markLost(ended)
              request.fail(ended)
              throw error
            }
          }
          // No `pg_advisory_unlock_all()` here: the session's client is its own and is shut down just below,
          // which ends the connection and with it every lock. Sent after a close had cancelled the client,
          // that query waited for the operation timeout (5 s) on the closing connection, and every stop of a
          // node waited for it twice (the stop and the host's shutdown after it).
        }
      } catch {
        failure = .storage("\(location): the session holding the partition leases ended: \(String(reflecting: error))")
      }
      state.markLost(failure)
      running.cancel()
      open.yield(.failure(failure))
      open.finish()
      // Whatever is still asked fails: the leases went with the session.
      for await request in stream { request.fail(failure) }
    }
    let leases = PartitionLeases(
      state: state,
      requests: requests,
      session: session,
      client: running,
      partitions: log.partitions,
      location: location,
      operationTimeout: log.operationTimeout
    )
    let first: Result<Int32, ServerLogError>
    do {
      first = try await log.withDeadline {
        var iterator = opened.makeAsyncIterator()
        return await iterator.next() ?? .failure(.storage("\(location): the lease session ended without an answer"))
      }
    } catch {
      // A session that neither opened nor failed in time is ended here, never left behind: connecting once
      // the network is back, or taking the node lock it waits for, it would hold that lock with no node
      // behind it (counted as a live node, shrinking every node's share). Its connection is closed, and its
      // backend, if one started, ended from another connection (a backend waiting for a lock does not read
      // its socket).
      let connected = state.mutex.withLock { state -> (connection: PostgresConnection, pid: Int32)? in
        defer { state.opening = .abandoned }
        guard case .connected(let connection, let pid) = state.opening else { return nil }
        return (connection, pid)
      }
      session.cancel()
      if let connected {
        try? await connected.connection.close()
        // Asked again until it is answered or the deadline passes: one refused attempt (no connection to be
        // had at that moment) would leave the backend waiting for the node lock.
        _ = try? await log.withDeadline { [client = log.client] in
          while true {
            do {
              try await client.query("SELECT pg_terminate_backend(\(connected.pid))", logger: logger)
              return
            } catch {
              try await Task.sleep(for: .milliseconds(100))
            }
          }
        }
      }
      await leases.close()
      throw error
    }
    if case .failure(let error) = first {
      await leases.close()
      throw error
    }
    state.confirm(askedAt: began)
    leases.startConfirming(every: bound / 4)
    return leases
  }

  /// Asks the session every `interval` until it is lost or closed: each answer confirms the leases
  /// (``holdsLeases``), and a session that does not answer within the operation timeout is lost.
  private func startConfirming(every interval: Duration) {
    let task = Task { [weak self] in
      while !Task.isCancelled {
        try? await Task.sleep(for: interval)
        guard let leases = self, !Task.isCancelled else { return }
        do throws(ServerLogError) {
          try await leases.confirm()
        } catch {
          return
        }
      }
    }
    state.mutex.withLock { $0.confirming = task }
  }

  /// Whether the node may serve its leased partitions now: the session lives and answered within the
  /// bound (``LeaseConfirmation``). A session silent for longer serves nothing, even before it is given up.
  public var holdsLeases: Bool {
    state.mutex.withLock { $0.lost == nil && $0.confirmation.holds(at: .now) }
  }

  /// Until when the session's answers confirm the leases, as of now.
  public var confirmation: LeaseConfirmation<ContinuousClock.Instant> { state.mutex.withLock { $0.confirmation } }

  /// Asks the session for nothing but an answer, which confirms the leases.
  /// - Throws: ``ServerLogError/storage(_:)`` when the session ended or did not answer in time.
  public func confirm() async throws(ServerLogError) {
    _ = try await ask { .confirm($0) }
  }

  /// Tells every node to look at the leases now (a notification on the lease channel,
  /// ``PostgresServerLog/waitForLeaseChange(after:)``), sent on this session: the one connection a look has
  /// just proved answers. After a network cut the log's pool may still be waiting out connection attempts
  /// made during the cut, and an announcement through it would hold the look until the operation timeout.
  /// Best effort: an announcement lost costs the others a look interval.
  public func announceChange() async {
    _ = try? await ask { .announce($0) }
  }

  /// The partitions this node holds (empty once the session ended).
  public var held: Set<Int> { state.mutex.withLock { $0.held } }

  /// Why the leases were lost, once the session holding them ended (every lease went with it); `nil` while
  /// it lives.
  public var lost: ServerLogError? { state.mutex.withLock { $0.lost } }

  /// Tries to take partition `partition`'s lease, without waiting for a node that holds it.
  /// - Returns: Whether this node holds it now.
  /// - Throws: ``ServerLogError/storage(_:)`` when the session ended (every lease is lost) or did not answer
  ///   in time; ``ServerLogError/partitionCount(found:asked:)`` for a partition beyond the log's.
  public func tryAcquire(_ partition: Int) async throws(ServerLogError) -> Bool {
    try check(partition)
    let taken = try await ask { .acquire(partition, $0) }
    if taken { state.mutex.withLock { _ = $0.held.insert(partition) } }
    return taken
  }

  /// Lets partition `partition`'s lease go (another node may take it at once).
  /// - Throws: ``ServerLogError/storage(_:)`` when the session ended or did not answer in time.
  public func release(_ partition: Int) async throws(ServerLogError) {
    try check(partition)
    state.mutex.withLock { _ = $0.held.remove(partition) }
    _ = try await ask { .release(partition, $0) }
  }

  /// Lets every lease go and stops counting as a live node, while the session still lives: the other nodes'
  /// next survey finds every partition free and this node gone, without waiting for the session's end to
  /// reach the database. For a node about to close its leases.
  /// - Throws: ``ServerLogError/storage(_:)`` when the session ended or did not answer in time (its locks
  ///   then go with it).
  public func releaseAll() async throws(ServerLogError) {
    state.mutex.withLock { $0.held = [] }
    _ = try await ask { .releaseAll($0) }
  }

  /// What the cluster looks like now: the live nodes and who holds which partition.
  /// - Throws: ``ServerLogError/storage(_:)`` when the session ended or did not answer in time.
  public func survey() async throws(ServerLogError) -> LeaseSurvey {
    try await ask { .survey($0) }
  }

  /// Records where this node answers HTTP (`http://10.0.0.5:8080`, say), so that the others can send it
  /// the requests of its partitions' users (``LeaseSurvey/addresses``), and where its lean poll listener
  /// answers the events route, if it has one (``LeaseSurvey/pollAddresses``). Kept with this session: when
  /// it ends, the addresses no longer count.
  /// - Throws: ``ServerLogError/storage(_:)`` when the session ended or did not answer in time.
  public func advertise(_ address: String, pollAddress: String? = nil) async throws(ServerLogError) {
    _ = try await ask { .advertise(address, polls: pollAddress, $0) }
  }

  /// Ends the session: every lease is let go at once. The session's connection is closed without waiting
  /// for what the session was doing (the database releases a session's advisory locks when its connection
  /// ends): under load a survey in progress can take seconds, and a node stopping must not wait for it
  /// before its partitions are free (a SIGTERM hands them over within the takeover bound).
  public func close() async {
    state.mutex.withLock { $0.confirming?.cancel() }
    requests.finish()
    client.cancel()
    let session = session
    _ = try? await PostgresServerLog.withDeadline(operationTimeout, at: location) { await session.value }
  }

  private func check(_ partition: Int) throws(ServerLogError) {
    guard (0..<partitions.count).contains(partition) else {
      throw .partitionCount(found: partitions.count, asked: partition + 1)
    }
  }

  /// Hands `request` to the session and waits for its answer, within the operation timeout. A session that
  /// does not answer may have been ended by the database (which then released its locks): its leases are
  /// taken as lost.
  private func ask<Value: Sendable>(
    _ request: @escaping @Sendable (CheckedContinuation<Result<Value, ServerLogError>, Never>) -> Request
  ) async throws(ServerLogError) -> Value {
    let requests = requests
    let location = location
    let state = state
    let session = session
    let client = client
    let askedAt = ContinuousClock.now
    let answered = try await PostgresServerLog.withDeadline(
      operationTimeout,
      at: location,
      onTimeout: {
        state.markLost(.storage("\(location): the lease session did not answer within the operation timeout"))
        session.cancel()
        client.cancel()
      }
    ) {
      await withCheckedContinuation { inner in
        if case .terminated = requests.yield(request(inner)) {
          inner.resume(returning: .failure(.storage("\(location): the partition leases are closed")))
        }
      }
    }
    let value = try answered.get()
    state.confirm(askedAt: askedAt)
    return value
  }

  /// Adds `partition_node.poll_address` to a log created before the lean poll listener served partitioned
  /// nodes (nodes of earlier versions insert without it: their polls are forwarded to their main address).
  /// Read first, so that the table is locked only the once it changes.
  private static func addPollAddressColumn(on connection: PostgresConnection, logger: Logger) async throws {
    let rows = try await connection.query(
      """
      SELECT count(*) FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = 'partition_node' AND column_name = 'poll_address'
      """,
      logger: logger
    )
    var found = 0
    for try await count in rows.decode(Int.self) { found = count }
    guard found == 0 else { return }
    try await connection.query(
      "ALTER TABLE partition_node ADD COLUMN IF NOT EXISTS poll_address text",
      logger: logger
    )
  }

  /// Records this session in `partition_node` (with no address until ``advertise(_:pollAddress:)``), once it
  /// holds the node lock: only a session whose node went on past the lock's answer counts as a live node
  /// (``LeaseSurvey/liveNodes``). A session whose node gave it up while it waited for the lock, or before
  /// it connected, may still take the lock; it never gets this far, and holds no lease.
  private static func register(on connection: PostgresConnection, logger: Logger) async throws {
    // Rows of sessions that ended are stale: a new session may reuse their pid, so they go first.
    try await connection.query(
      """
      DELETE FROM partition_node WHERE pid = pg_backend_pid()
        OR pid NOT IN (SELECT pid FROM pg_stat_activity)
      """,
      logger: logger
    )
    try await connection.query(
      "INSERT INTO partition_node (pid, address) VALUES (pg_backend_pid(), '')",
      logger: logger
    )
  }

  /// Reads the advisory locks of this database: nodes alive (holders of ``nodeKey`` recorded in
  /// `partition_node`: ``register(on:logger:)``) and partition leases.
  private static let surveyQuery: @Sendable (PostgresConnection, Int32, Logger) async throws -> LeaseSurvey = {
    connection,
    pid,
    logger in
    let leaseKind = leaseKeyBase >> 32
    let nodeKind = nodeKey >> 32
    let rows = try await connection.query(
      """
      SELECT l.classid::bigint, l.objid::bigint, l.pid, n.pid IS NOT NULL, n.address, n.poll_address FROM pg_locks l
      LEFT JOIN partition_node n ON n.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.classid::bigint IN (\(leaseKind), \(nodeKind))
      """,
      logger: logger
    )
    var survey = LeaseSurvey(liveNodes: 0, mine: [], heldByOthers: [])
    for try await (kind, low, holder, registered, address, pollAddress) in rows.decode(
      (Int64, Int64, Int32, Bool, String?, String?).self
    ) {
      if kind == nodeKind {
        // A session holding the node lock with no node behind it (given up while it waited) is not one.
        if registered || holder == pid { survey.liveNodes += 1 }
      } else if holder == pid {
        survey.mine.insert(Int(low))
      } else {
        survey.heldByOthers.insert(Int(low))
        if let address, !address.isEmpty { survey.addresses[Int(low)] = address }
        if let pollAddress { survey.pollAddresses[Int(low)] = pollAddress }
      }
    }
    return survey
  }
}

/// What a node saw of the cluster's leases (``PartitionLeases/survey()``): the input of a
/// ``PartitionLeasePlan``.
public struct LeaseSurvey: Sendable, Hashable {
  /// The nodes holding leases or ready to (each holds the shared node lock and is recorded in
  /// `partition_node`), this one included.
  public var liveNodes: Int
  /// The partitions this node holds.
  public var mine: Set<Int>
  /// The partitions other nodes hold.
  public var heldByOthers: Set<Int>
  /// Where the holders of others' partitions answer HTTP, for those that advertised it
  /// (``PartitionLeases/advertise(_:)``).
  public var addresses: [Int: String]
  /// Where the holders of others' partitions answer the events route on a lean poll listener, for those
  /// that have one.
  public var pollAddresses: [Int: String]

  /// A survey from its parts.
  public init(
    liveNodes: Int,
    mine: Set<Int>,
    heldByOthers: Set<Int>,
    addresses: [Int: String] = [:],
    pollAddresses: [Int: String] = [:]
  ) {
    self.liveNodes = liveNodes
    self.mine = mine
    self.heldByOthers = heldByOthers
    self.addresses = addresses
    self.pollAddresses = pollAddresses
  }
}
