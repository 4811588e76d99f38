import EventServer
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The input log and the newest snapshot in PostgreSQL: `event-server --postgres URL`.
///
/// Tables (schema ``schemaVersion``, created and upgraded at start under an advisory lock, so several nodes
/// starting at once do not race; a schema found current is only read, so a node starting beside running
/// ones never waits for their appends nor makes them wait):
/// - `event_log_meta(id = 1, schema_version, last_position, partition_count)`: the one row that orders
///   appends (of partition 0), and how many partitions the log has;
/// - `event_log(position bigint PRIMARY KEY, record bytea)`: the framed records (``ServerLogCodec``);
/// - `event_snapshot(id = 1, position, state bytea)`;
/// - for a log of several partitions, the same three for each partition *p* > 0, suffixed `_p`*p*
///   (``partition(_:)``).
///
/// **Positions are in commit order.** Every append updates the `event_log_meta` row in its own transaction,
/// so appenders hold that row's lock from taking their positions until they commit, one after another; a
/// transaction becomes visible before it releases its locks, so whatever a reader's statement sees is a
/// prefix of the log: no reader can read past a position that commits later (a `bigserial` gives no such
/// promise: a lower number can commit after a higher one was read). `PostgresServerLogTests` races
/// appenders and readers to check it. Each partition has its own counter row, so appends to different
/// partitions never wait for each other: there is no lock over the whole log.
///
/// Two ways to append:
/// - ``append(_:)`` (the ``ServerLog`` call one server uses): the positions are the server's, and the append
///   is **fenced**: it commits only if the log's last position is the one before them, so a second server
///   started on the same database by mistake fails its first write instead of interleaving records.
/// - ``appendAssigningPositions(_:)``: the database assigns the next positions; with
///   ``records(after:limit:)`` and the `event_log` notification channel, what several nodes replicate from.
///
/// ```swift
/// let log = try await PostgresServerLog.connect(url: "postgres://events@127.0.0.1:5432/events", logger: logger)
/// let (server, _) = try await EventServer.recovering(from: log, application: app, clock: ContinuousClock())
/// ```
public final class PostgresServerLog: SharedServerLog {
  /// The schema this build creates and reads (2: partitions).
  public static var schemaVersion: Int { 2 }
  /// The channel every append to partition 0 notifies, with the last position appended as the payload
  /// (partition *p* > 0 notifies `event_log_p`*p*).
  public static var notificationChannel: String { "event_log" }
  /// The advisory lock key that serialises schema set-up across nodes.
  static var setUpLockKey: Int64 { 0x6576_656E_745F_6C67 }

  /// The advisory lock key of the servers on one database: one server (``claimForOneServer()``) holds it
  /// exclusively, the nodes of a cluster (``claimPlaceInCluster()``) shared. Advisory locks belong to a
  /// database, so servers on other databases of the same PostgreSQL never meet it.
  static var serverLockKey: Int64 { 0x6576_656E_745F_7376 }

  /// The advisory lock key of the nodes of partition *p* > 0 is this plus *p* (partition 0's nodes share
  /// ``serverLockKey``): whether a node starts its partition again is a question about that partition.
  static var partitionPlaceKeyBase: Int64 { 0x6576_5070_0000_0000 }

  /// The key of this log's nodes (``claimPlaceInCluster()``).
  private var placeKey: Int64 {
    tables.partition == 0 ? Self.serverLockKey : Self.partitionPlaceKeyBase + Int64(tables.partition)
  }

  /// How many records a snapshot leaves in the table behind it, so that a node a little behind still reads
  /// them instead of rebuilding from the snapshot.
  public static var recordsKeptBehindSnapshot: Int64 { 10_000 }

  let client: PostgresClient
  /// The task running the client's connections: held by the log ``connect(url:logger:operationTimeout:partitions:)``
  /// returned, `nil` in the views of its partitions (``partition(_:)``), which share its connections.
  private let running: Task<Void, Never>?
  /// The task holding the session whose advisory lock claims the database, once claimed.
  private let claimHolder = Mutex<Task<Void, Never>?>(nil)
  private let appendHints = AppendHints()
  /// Hints that another partition left messages in this one's inbox (a counter of notifications heard).
  let inboxHints = AppendHints()
  /// Hints that a node let leases go or joined (a counter of notifications heard).
  let leaseHints = AppendHints()
  let logger: Logger
  /// The tables of this log's partition.
  let tables: LogTables
  /// The database, without its password: what errors and logs name.
  public let location: String
  /// How long a read or a write may take before it fails.
  public let operationTimeout: Duration
  /// How many partitions the log has (fixed when the database was created).
  public let partitions: PartitionMap
  /// How to reach the database: what a session that must not share the pool connects with
  /// (``PartitionLeases``).
  let clientConfiguration: PostgresClient.Configuration
  /// Whether its connections are failing (shared with its partitions' views): its failures are logged once
  /// per outage (``ConnectionOutageLogHandler``).
  let outage: ConnectionOutageLogHandler.Shared

  private init(
    client: PostgresClient,
    clientConfiguration: PostgresClient.Configuration,
    running: Task<Void, Never>?,
    tables: LogTables,
    partitions: PartitionMap,
    location: String,
    logger: Logger,
    operationTimeout: Duration,
    outage: ConnectionOutageLogHandler.Shared
  ) {
    self.outage = outage
    self.client = client
    self.clientConfiguration = clientConfiguration
    self.running = running
    self.tables = tables
    self.partitions = partitions
    self.location = location
    self.logger = logger
    self.operationTimeout = operationTimeout
  }

  /// Connects to the database at `url` (`postgres://user[:password]@host[:port]/database`; TLS unless the
  /// host is loopback or `?sslmode=disable`, required with `?sslmode=require`) and creates or upgrades
  /// the schema. Every read and write after that fails when the database has not answered within
  /// `operationTimeout` (the server then stops accepting writes, as for a failing disk).
  ///
  /// The log returned is partition 0; ``partition(_:)`` gives the others.
  /// - Parameter partitions: How many partitions a new log gets; for a log that exists, the count it must
  ///   have (`nil`: whatever it has, 1 for a new one). Fixed once the log is created.
  /// - Throws: ``ServerLogError/newerFormat(found:supported:)`` for a database of a newer schema (left as
  ///   it is); ``ServerLogError/partitionCount(found:asked:)`` for a log with another partition count;
  ///   ``ServerLogError/storage(_:)`` when the URL is not one or the database cannot be reached.
  public static func connect(
    url: String,
    logger: Logger,
    operationTimeout: Duration = .seconds(5),
    partitions: PartitionMap? = nil
  ) async throws(ServerLogError) -> PostgresServerLog {
    // Every pool of this log and of its partitions' views, and its lease sessions, share one outage.
    let outage = ConnectionOutageLogHandler.Shared()
    let logger = logger.summarizingConnectionOutages(outage)
    let target = try PostgresURL(url)
    let found = try await setUp(
      target: target,
      partitions: partitions,
      logger: logger,
      operationTimeout: operationTimeout
    )
    // A node serving every partition holds two sessions per partition (its place and its listener) beside
    // its turns and reads: the pool grows with the partitions.
    var configuration = target.configuration
    configuration.options.maximumConnections = max(20, 3 * found.count + 10)
    let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
    return PostgresServerLog(
      client: client,
      clientConfiguration: target.configuration,
      running: PostgresServerLog.runDetached(client),
      tables: LogTables(partition: 0),
      partitions: found,
      location: target.location,
      logger: logger,
      operationTimeout: operationTimeout,
      outage: outage
    )
  }

  /// Creates or upgrades the schema on a client of its own, closed afterwards; answers the partition count.
  private static func setUp(
    target: PostgresURL,
    partitions: PartitionMap?,
    logger: Logger,
    operationTimeout: Duration
  ) async throws(ServerLogError) -> PartitionMap {
    let client = PostgresClient(configuration: target.configuration, backgroundLogger: logger)
    let setUp = PostgresServerLog(
      client: client,
      clientConfiguration: target.configuration,
      running: PostgresServerLog.runDetached(client),
      tables: LogTables(partition: 0),
      partitions: .single,
      location: target.location,
      logger: logger,
      operationTimeout: operationTimeout,
      outage: ConnectionOutageLogHandler.Shared()
    )
    do {
      let found = try await setUp.setUp(partitions: partitions)
      await setUp.close()
      return found
    } catch {
      await setUp.close()
      throw error
    }
  }

  /// Partition `index` of this log, sharing its connections: its own counter row, records, snapshot and
  /// notification channel. Close it (its listener and claims) before closing the log it came from, which
  /// closes the connections.
  /// - Throws: ``ServerLogError/partitionCount(found:asked:)`` when `index` is not below the log's count.
  public func partition(_ index: Int) throws(ServerLogError) -> PostgresServerLog {
    guard (0..<partitions.count).contains(index) else {
      throw .partitionCount(found: partitions.count, asked: index + 1)
    }
    return PostgresServerLog(
      client: client,
      clientConfiguration: clientConfiguration,
      running: nil,
      tables: LogTables(partition: index),
      partitions: partitions,
      location: index == 0 ? location : "\(location) partition \(index)",
      logger: logger,
      operationTimeout: operationTimeout,
      outage: outage
    )
  }

  /// Partition `index` of this log on connections of its own (at most `connections`), closed with it: what a
  /// ``PartitionHost`` serves a partition it takes with, so that stopping the partition's node closes every
  /// connection it used, including one whose query never ends because the database went away (found by the
  /// cluster soak: after a PostgreSQL restart, nodes on the shared pool got dead connections and hung).
  /// - Throws: ``ServerLogError/partitionCount(found:asked:)`` when `index` is not below the log's count.
  public func openPartition(_ index: Int, connections: Int = 6) throws(ServerLogError) -> PostgresServerLog {
    guard (0..<partitions.count).contains(index) else {
      throw .partitionCount(found: partitions.count, asked: index + 1)
    }
    var configuration = clientConfiguration
    configuration.options.maximumConnections = max(connections, 3)
    let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
    return PostgresServerLog(
      client: client,
      clientConfiguration: clientConfiguration,
      running: PostgresServerLog.runDetached(client),
      tables: LogTables(partition: index),
      partitions: partitions,
      location: index == 0 ? location : "\(location) partition \(index)",
      logger: logger,
      operationTimeout: operationTimeout,
      outage: outage
    )
  }

  /// The partition this log writes: 0 for the log ``connect(url:logger:operationTimeout:partitions:)``
  /// returned.
  public var partitionIndex: Int { tables.partition }

  /// Closes this log's listener and claims, and, for the log ``connect(url:logger:operationTimeout:partitions:)``
  /// returned, every connection (releasing this server's claim on the database).
  public func close() async {
    if let holder = claimHolder.withLock({ $0.take() }) {
      holder.cancel()
      await holder.value
    }
    appendHints.stop()
    inboxHints.stop()
    leaseHints.stop()
    if let running {
      running.cancel()
      await running.value
    }
  }

  // MARK: - ServerLog

  public func load() async throws(ServerLogError) -> StoredLog {
    try await transaction { connection in
      var snapshot: StoredSnapshot?
      let snapshotRows = try await connection.query(
        "SELECT position, state FROM \(unescaped: self.tables.snapshot) WHERE id = 1",
        logger: self.logger
      )
      for try await (position, state) in snapshotRows.decode((Int64, ByteBuffer).self) {
        snapshot = StoredSnapshot(position: UInt64(max(position, 0)), bytes: Data(state.readableBytesView))
      }
      let after = Int64(snapshot?.position ?? 0)
      let rows = try await connection.query(
        "SELECT position, record FROM \(unescaped: self.tables.records) WHERE position > \(after) ORDER BY position",
        logger: self.logger
      )
      var records: [StoredRecord] = []
      for try await (position, record) in rows.decode((Int64, ByteBuffer).self) {
        records.append(StoredRecord(position: UInt64(max(position, 0)), bytes: Data(record.readableBytesView)))
      }
      return StoredLog(snapshot: snapshot, records: records)
    }
  }

  /// Appends `records`, which must follow the last stored position without a gap (the fence: another server
  /// writing to this database makes the positions disagree, and the append fails), and notifies
  /// ``notificationChannel``.
  ///
  /// One statement, so one round trip: the fence's update, the insert and the notification are parts of one
  /// statement and commit (or fail) together in its implicit transaction. As an explicit transaction (begin,
  /// update, insert, notify, commit) it took five round trips per group commit, which bounded the rate of
  /// acknowledged writes more than PostgreSQL's own commit did.
  public func append(_ records: [StoredRecord]) async throws(ServerLogError) {
    guard let first = records.first?.position else { return }
    let query = Self.fencedAppend(records, tables: tables)
    let fenced = try await withDeadline {
      let rows = try await self.client.query(query, logger: self.logger)
      var inserted: Int64 = 0
      for try await count in rows.decode(Int64.self) { inserted = count }
      return inserted == Int64(records.count)
    }
    guard fenced else { throw Self.positionTaken(first, at: location) }
  }

  /// The one statement that appends `records` after the position before the first (the fence: it fails to
  /// insert anything when another server appended there), inserts them and notifies the channel; it answers
  /// how many rows it inserted. A position already taken fails the whole statement: positions are never
  /// overwritten.
  static func fencedAppend(_ records: [StoredRecord], tables: LogTables) -> PostgresQuery {
    let first = Int64(records.first?.position ?? 1)
    let last = Int64(records.last?.position ?? 0)
    let positions = records.map { Int64($0.position) }
    let bytes = records.map { ByteBuffer(bytes: $0.bytes) }
    return """
      WITH fence AS (
        UPDATE \(unescaped: tables.meta) SET last_position = \(last)
        WHERE id = 1 AND last_position = \(first - 1) RETURNING last_position
      ), inserted AS (
        INSERT INTO \(unescaped: tables.records) (position, record)
        SELECT * FROM unnest(\(positions)::bigint[], \(bytes)::bytea[]) WHERE EXISTS (SELECT 1 FROM fence)
        RETURNING position
      )
      SELECT count(*) FROM inserted
      CROSS JOIN (SELECT pg_notify(\(tables.channel), \(String(last))) FROM fence) AS notified
      """
  }

  /// The fence refused an append at `first`.
  static func positionTaken(_ first: UInt64, at location: String) -> ServerLogError {
    .storage("\(location): position \(first) is already taken: another server appends to this database")
  }

  /// Stores the snapshot unless a newer one is stored already (several nodes write theirs), then drops the
  /// records more than ``recordsKeptBehindSnapshot`` behind the stored one.
  public func saveSnapshot(_ snapshot: StoredSnapshot) async throws(ServerLogError) {
    try await transaction { connection in
      let position = Int64(snapshot.position)
      let state = ByteBuffer(bytes: snapshot.bytes)
      try await connection.query(
        """
        INSERT INTO \(unescaped: self.tables.snapshot) AS stored (id, position, state) VALUES (1, \(position), \(state))
        ON CONFLICT (id) DO UPDATE SET position = EXCLUDED.position, state = EXCLUDED.state
        WHERE stored.position < EXCLUDED.position
        """,
        logger: self.logger
      )
      try await connection.query(
        """
        DELETE FROM \(unescaped: self.tables.records)
        WHERE position <= (SELECT position FROM \(unescaped: self.tables.snapshot) WHERE id = 1)
          - \(Self.recordsKeptBehindSnapshot)
        """,
        logger: self.logger
      )
    }
  }

  public func truncate(after position: UInt64) async throws(ServerLogError) {
    try await transaction { connection in
      let after = Int64(position)
      try await connection.query(
        "UPDATE \(unescaped: self.tables.meta) SET last_position = \(after) WHERE id = 1",
        logger: self.logger
      )
      try await connection.query(
        "DELETE FROM \(unescaped: self.tables.records) WHERE position > \(after)",
        logger: self.logger
      )
    }
  }

  // MARK: - Replication

  /// One turn of a cluster node (``SharedServerLog``): in one transaction, locks the `event_log_meta` row
  /// (the append lock: another node's turn waits here), reads every record after `position`, lets the node
  /// decide, inserts what it decided after the last position and commits, notifying the channel. The whole
  /// turn must end within ``operationTimeout``.
  public func appendTurn(
    after position: UInt64,
    _ decide: @escaping @Sendable ([StoredRecord]) async throws(ServerLogError) -> [StoredRecord]
  ) async throws(ServerLogError) {
    try await appendTurn(after: position, isolation: .eachStatement) { (committed, _) throws(ServerLogError) in
      try await decide(committed)
    }
  }

  /// One turn, as ``appendTurn(after:_:)``, whose `decide` also gets the turn's transaction: a stored
  /// application's statements run in it, and commit with the turn's records.
  public func appendTurn(
    after position: UInt64,
    isolation: TurnIsolation,
    inTransaction decide:
      @escaping @Sendable ([StoredRecord], any LogTransaction) async throws(ServerLogError) ->
      [StoredRecord]
  ) async throws(ServerLogError) {
    try await transaction { connection in
      // With one partition the append lock already excludes every other writer (and a snapshot taken
      // before waiting for it would miss what the previous holder appended): only partitions need one.
      if isolation == .oneSnapshot, self.partitions.count > 1 {
        try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", logger: self.logger)
      }
      let locked = try await connection.query(
        "SELECT last_position FROM \(unescaped: self.tables.meta) WHERE id = 1 FOR UPDATE",
        logger: self.logger
      )
      var last: Int64 = 0
      for try await value in locked.decode(Int64.self) { last = value }
      var committed: [StoredRecord] = []
      if UInt64(max(last, 0)) > position {
        let rows = try await connection.query(
          "SELECT position, record FROM \(unescaped: self.tables.records) WHERE position > \(Int64(position)) ORDER BY position",
          logger: self.logger
        )
        for try await (position, record) in rows.decode((Int64, ByteBuffer).self) {
          committed.append(StoredRecord(position: UInt64(max(position, 0)), bytes: Data(record.readableBytesView)))
        }
      }
      let decided = try await decide(committed, PostgresLogTransaction(log: self, connection: connection))
      guard let first = decided.first?.position, let newLast = decided.last?.position else { return }
      guard first == UInt64(last) + 1 else {
        throw ServerLogError.gap(after: UInt64(last), next: first)
      }
      try await connection.query(
        "UPDATE \(unescaped: self.tables.meta) SET last_position = \(Int64(newLast)) WHERE id = 1",
        logger: self.logger
      )
      try await self.insert(decided, on: connection)
    }
  }

  /// Returns once a notification names a position after `position`, or the listening connection was
  /// (re)established (notifications may have been missed meanwhile), or the task is cancelled. The first
  /// call starts listening on a connection of its own.
  public func waitForAppends(after position: UInt64) async {
    appendHints.startIfNeeded { [weak self] onAppend throws(ServerLogError) in
      guard let self else { return }
      try await self.listenForAppends(onAppend)
    }
    await appendHints.wait(after: position)
  }

  /// The newest position a notification announced: what a node's replication lag is measured against.
  /// Notifications start once the node follows the log (``waitForAppends(after:)``).
  public var announcedPosition: UInt64 { appendHints.latest }

  /// Appends records at the next positions the database assigns, in one transaction, and notifies
  /// ``notificationChannel`` when it commits.
  /// - Returns: The positions taken, in order.
  public func appendAssigningPositions(_ payloads: [Data]) async throws(ServerLogError) -> ClosedRange<UInt64>? {
    guard !payloads.isEmpty else { return nil }
    return try await transaction { connection in
      let rows = try await connection.query(
        """
        UPDATE \(unescaped: self.tables.meta) SET last_position = last_position + \(Int64(payloads.count))
        WHERE id = 1 RETURNING last_position
        """,
        logger: self.logger
      )
      var last: Int64 = 0
      for try await value in rows.decode(Int64.self) { last = value }
      let first = UInt64(last) - UInt64(payloads.count) + 1
      let records = payloads.enumerated().map { StoredRecord(position: first + UInt64($0.offset), bytes: $0.element) }
      try await self.insert(records, on: connection)
      return first...UInt64(last)
    }
  }

  /// Up to `limit` records after `position`, in order: always a gap-free run starting at `position + 1`
  /// (or nothing), since positions commit in order.
  public func records(after position: UInt64, limit: Int) async throws(ServerLogError) -> [StoredRecord] {
    try await withDeadline {
      let rows = try await self.client.query(
        """
        SELECT position, record FROM \(unescaped: self.tables.records) WHERE position > \(Int64(position))
        ORDER BY position LIMIT \(Int64(limit))
        """,
        logger: self.logger
      )
      var records: [StoredRecord] = []
      for try await (position, record) in rows.decode((Int64, ByteBuffer).self) {
        records.append(StoredRecord(position: UInt64(max(position, 0)), bytes: Data(record.readableBytesView)))
      }
      return records
    }
  }

  /// Listens on ``notificationChannel`` and calls `onAppend` with the last position of each append that
  /// commits, until the task is cancelled or the connection drops (then it throws: a notification sent
  /// while nobody listened is lost, so a follower re-reads from its last position after reconnecting).
  /// Notifications are hints for waking a reader early, never the record of what was appended.
  public func listenForAppends(_ onAppend: @escaping @Sendable (UInt64) async -> Void) async throws(ServerLogError) {
    try await listen(on: tables.channel) { payload in
      if let position = UInt64(payload) { await onAppend(position) }
    }
  }

  /// Listens on `channel` and calls `onNotification` with each notification's payload, until the task is
  /// cancelled or the connection drops (then it throws).
  func listen(
    on channel: String,
    _ onNotification: @escaping @Sendable (String) async -> Void
  ) async throws(ServerLogError) {
    do {
      try await client.withConnection { connection in
        try await connection.listen(on: channel) { notifications in
          for try await notification in notifications { await onNotification(notification.payload) }
        }
      }
    } catch is CancellationError {
      return
    } catch {
      throw .storage("\(location): listening stopped: \(String(reflecting: error))")
    }
  }

  // MARK: - Claims

  /// Claims the database for this one server: refused while another server or any cluster node uses it.
  /// Held by a session of its own until ``close()`` or the process's end (PostgreSQL releases a dead
  /// session's locks).
  /// - Throws: ``ServerLogError/inUse(_:)``; ``ServerLogError/storage(_:)`` when the database cannot answer.
  public func claimForOneServer() async throws(ServerLogError) {
    guard partitions.count == 1 else {
      throw .inUse("\(location) has \(partitions.count) partitions: it is served by cluster nodes, not by one server")
    }
    let key = Self.serverLockKey
    let logger = logger
    let claim = try await holdSession { connection in
      try await Self.bool("SELECT pg_try_advisory_lock(\(key))", on: connection, logger: logger)
        ? .held(startsCluster: false) : .refused
    }
    guard claim != .refused else {
      throw .inUse(
        "\(location) is used by another server or by cluster nodes: stop it first (one server per database)"
      )
    }
  }

  /// Claims a place among the cluster's nodes: refused while one server (not a node) holds the database.
  /// On partition *p* > 0 (``partition(_:)``), a place among that partition's nodes.
  /// - Returns: Whether no other node held a place (this node starts the cluster, or the partition, again).
  /// - Throws: ``ServerLogError/inUse(_:)``; ``ServerLogError/storage(_:)`` when the database cannot answer.
  public func claimPlaceInCluster() async throws(ServerLogError) -> Bool {
    let key = placeKey
    let logger = logger
    let claim = try await holdSession { connection in
      // Exclusive at once: nobody else is here, this node starts the cluster. It then keeps a shared hold, as
      // every node does, and lets the exclusive one go.
      if try await Self.bool("SELECT pg_try_advisory_lock(\(key))", on: connection, logger: logger) {
        try await connection.query("SELECT pg_advisory_lock_shared(\(key))", logger: logger)
        try await connection.query("SELECT pg_advisory_unlock(\(key))", logger: logger)
        return .held(startsCluster: true)
      }
      return try await Self.bool("SELECT pg_try_advisory_lock_shared(\(key))", on: connection, logger: logger)
        ? .held(startsCluster: false) : .refused
    }
    guard case .held(let startsCluster) = claim else {
      throw .inUse("\(location) is held by a server that is not a cluster node: stop it first")
    }
    return startsCluster
  }

  /// What a claim found.
  private enum Claim: Equatable, Sendable {
    case held(startsCluster: Bool)
    case refused
  }

  /// Runs `attempt` on a connection of its own and, when it holds a lock, keeps that session open (and the
  /// lock with it) until ``close()``. Answered within ``operationTimeout``.
  private func holdSession(
    _ attempt: @escaping @Sendable (PostgresConnection) async throws -> Claim
  ) async throws(ServerLogError) -> Claim {
    let (answers, answer) = AsyncStream.makeStream(of: Result<Claim, ServerLogError>.self)
    let logger = logger
    let location = location
    let client = client
    let sharesConnections = running == nil
    let holder = Task {
      do {
        try await client.withConnection { connection in
          let claim = try await attempt(connection)
          answer.yield(.success(claim))
          guard claim != .refused else { return }
          while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
          // A log closing connections of its own ends the session, and its locks with it. A view sharing its
          // log's connections lets go before handing the connection back. (Found by the partitioned cluster
          // soak: under load this query sometimes did not end, and every partition stopped waited for it.)
          if sharesConnections {
            _ = try? await connection.query("SELECT pg_advisory_unlock_all()", logger: logger)
          }
        }
      } catch {
        answer.yield(.failure(.storage("\(location): cannot claim the database: \(String(reflecting: error))")))
      }
      answer.finish()
    }
    let first: Result<Claim, ServerLogError>
    do {
      first = try await withDeadline {
        var iterator = answers.makeAsyncIterator()
        return await iterator.next() ?? .failure(.storage("\(location): the claim ended without an answer"))
      }
    } catch {
      holder.cancel()
      throw error
    }
    switch first {
    case .success(let claim) where claim != .refused:
      claimHolder.withLock { $0 = holder }
      return claim
    case .success(let claim):
      return claim
    case .failure(let error):
      holder.cancel()
      throw error
    }
  }

  /// The one boolean `query` answers on `connection`.
  static func bool(
    _ query: PostgresQuery,
    on connection: PostgresConnection,
    logger: Logger
  ) async throws -> Bool {
    var value = false
    for try await row in try await connection.query(query, logger: logger).decode(Bool.self) { value = row }
    return value
  }

  // MARK: - Helpers

  /// Inserts the records in one statement and notifies the channel (sent when the transaction commits).
  ///
  /// Not on a log of several partitions: a partition has one holder, which applied its own records in the
  /// turn that wrote them, so there is no one to wake; and PostgreSQL serialises every committing
  /// transaction that notified behind one lock on the notification queue (`AccessExclusiveLock` on object 0
  /// of `pg_database`), which is a lock over every partition: with 16 partitions its waits were the only
  /// lock waits left, and grew with the nodes. A write by a node that lost its lease without knowing is
  /// read by the new holder's next turn or its follower's next look (every second).
  private func insert(_ records: [StoredRecord], on connection: PostgresConnection) async throws {
    let positions = records.map { Int64($0.position) }
    let bytes = records.map { ByteBuffer(bytes: $0.bytes) }
    // A position already taken fails the whole write: positions are never overwritten.
    try await connection.query(
      """
      INSERT INTO \(unescaped: tables.records) (position, record)
      SELECT * FROM unnest(\(positions)::bigint[], \(bytes)::bytea[])
      """,
      logger: logger
    )
    guard partitions.count == 1 else { return }
    let last = String(records.last?.position ?? 0)
    try await connection.query("SELECT pg_notify(\(tables.channel), \(last))", logger: logger)
  }

  /// Runs `body` in a transaction that must end within ``operationTimeout``: a database that does not
  /// answer (stopped, unreachable, a pool waiting for a connection) fails the call instead of holding the
  /// request for ever. A transaction that commits after its deadline passed is harmless: its write was
  /// never answered, and the restart that follows the failure reads it back.
  func transaction<Result: Sendable>(
    _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
  ) async throws(ServerLogError) -> Result {
    try await withDeadline {
      try await self.client.withTransaction(logger: self.logger) { connection in try await body(connection) }
    }
  }

  /// Runs `client`'s connections in a task detached from the caller's: PostgresNIO's `run()` ends at the
  /// graceful shutdown of a service it runs under (`cancelWhenGracefulShutdown`), and a task made with
  /// `Task {}` inherits that from a service's task-local context. A partition a node took during a look (a
  /// look runs inside the node's services) then lost its connections the moment the node began to stop:
  /// its last turn waited for a connection until the log's deadline, and the node's leases, so the
  /// partitions' takeover, waited 5 s with it (`PostgresClientLifetimeTests`). A log's connections end with
  /// ``close()`` only.
  static func runDetached(_ client: PostgresClient) -> Task<Void, Never> {
    Task.detached { await client.run() }
  }

  /// Runs `operation`, failing it with ``ServerLogError/storage(_:)`` after ``operationTimeout``.
  ///
  /// The caller is answered at the deadline even when the operation does not end on cancellation (a pool
  /// waiting for a connection to a stopped database may not): the operation is cancelled and left to end
  /// on its own, and what it still does is harmless (a turn abandoned this way decides nothing, see
  /// ``appendTurn(after:_:)``; a write that commits late was never answered).
  func withDeadline<Result: Sendable>(
    _ operation: @escaping @Sendable () async throws -> Result
  ) async throws(ServerLogError) -> Result {
    let result = try await Self.withDeadline(operationTimeout, at: location, operation)
    outage.noteWorking(logger)
    return result
  }

  /// Runs `operation`, failing it with ``ServerLogError/storage(_:)`` naming `location` after `timeout` (see
  /// the instance method); `onTimeout` runs when the deadline, not the operation, gave the answer.
  static func withDeadline<Result: Sendable>(
    _ timeout: Duration,
    at location: String,
    onTimeout: @escaping @Sendable () -> Void = {},
    _ operation: @escaping @Sendable () async throws -> Result
  ) async throws(ServerLogError) -> Result {
    let answer = FirstAnswer<Result>()
    let outcome = await withCheckedContinuation { continuation in
      answer.install(continuation)
      let work = Task {
        do {
          answer.give(.success(try await operation()))
        } catch let error as ServerLogError {
          answer.give(.failure(error))
        } catch {
          answer.give(.failure(.storage("\(location): \(String(reflecting: error))")))
        }
      }
      Task {
        try? await Task.sleep(for: timeout)
        work.cancel()
        // The timeout's consequences (leases marked lost, say) are in place before the caller hears of it.
        answer.give(.failure(.storage("\(location): no answer within \(timeout)")), first: onTimeout)
      }
    }
    return try outcome.get()
  }
}

/// The first of several answers (an operation's, its deadline's), given to one waiting caller.
final class FirstAnswer<Value: Sendable>: Sendable {
  private let state = Mutex<(continuation: CheckedContinuation<Result<Value, ServerLogError>, Never>?, given: Bool)>(
    (nil, false)
  )

  func install(_ continuation: CheckedContinuation<Result<Value, ServerLogError>, Never>) {
    state.withLock { $0.continuation = continuation }
  }

  /// Gives `result` unless an answer was given already; when it is the answer, runs `first` before the
  /// caller resumes (so that what the caller reads next already shows what `first` did).
  /// - Returns: Whether this was the answer given.
  @discardableResult
  func give(_ result: Result<Value, ServerLogError>, first: () -> Void = {}) -> Bool {
    let continuation = state.withLock { state -> CheckedContinuation<Result<Value, ServerLogError>, Never>? in
      guard !state.given else { return nil }
      state.given = true
      defer { state.continuation = nil }
      return state.continuation
    }
    guard let continuation else { return false }
    first()
    continuation.resume(returning: result)
    return true
  }
}
