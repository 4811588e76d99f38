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
  var placeKey: Int64 {
    tables.partition == 0 ? Self.serverLockKey : Self.partitionPlaceKeyBase + Int64(tables.partition)
  }

  /// How many records a snapshot leaves in the table behind it, so that a node a little behind still reads
  /// them instead of rebuilding from the snapshot.
  public static var recordsKeptBehindSnapshot: Int64 { 10_000 }

  let client: PostgresClient
  /// The task running the client's connections: held by the log ``connect(url:logger:operationTimeout:partitions:)``
  /// returned, `nil` in the views of its partitions (``partition(_:)``), which share its connections.
  let running: Task<Void, Never>?
  /// The task holding the session whose advisory lock claims the database, once claimed.
  let claimHolder = Mutex<Task<Void, Never>?>(nil)
  let appendHints = AppendHints()
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
  /// `PartitionHost` (module `PartitionHosting`) serves a partition it takes with, so that stopping the partition's node closes every
  /// connection it used, including one whose query never ends because the database went away (on a pool
  /// shared by every partition, such dead connections outlived a PostgreSQL restart and hung the nodes).
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
}
