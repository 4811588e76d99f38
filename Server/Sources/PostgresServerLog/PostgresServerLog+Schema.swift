import EventServer
import Logging
import PostgresNIO

/// The schema: created, upgraded, or found current at a node's start.
///
/// Nodes start while others append: a start must not lock what appends use (`event_log_meta`'s row is
/// partition 0's counter, which every append of that partition updates). Finding the schema current takes
/// only reads; creating or upgrading it runs under the set-up advisory lock, so that nodes starting together
/// do not race.
extension PostgresServerLog {
  /// Creates or upgrades the schema and the partitions' tables; answers the log's partition count.
  ///
  /// A node starting on a log whose schema is current only reads (``currentSchema(asked:on:logger:)``):
  /// it takes no lock the running nodes' appends would wait for.
  func setUp(partitions asked: PartitionMap?) async throws(ServerLogError) -> PartitionMap {
    let found = try await transaction { connection -> (version: Int, partitions: Int) in
      if let partitions = try await Self.currentSchema(asked: asked, on: connection, logger: self.logger) {
        return (Self.schemaVersion, partitions)
      }
      try await connection.query("SELECT pg_advisory_xact_lock(\(Self.setUpLockKey))", logger: self.logger)
      try await connection.query(
        """
        CREATE TABLE IF NOT EXISTS event_log_meta (
          id integer PRIMARY KEY CHECK (id = 1), schema_version integer NOT NULL, last_position bigint NOT NULL)
        """,
        logger: self.logger
      )
      let rows = try await connection.query(
        "SELECT schema_version FROM event_log_meta WHERE id = 1",
        logger: self.logger
      )
      var version: Int?
      for try await (value) in rows.decode(Int32.self) { version = Int(value) }
      if let version, version > Self.schemaVersion { return (version, 0) }
      // Version 2: the partition count (a log of version 1 has one partition). Added only when missing: an
      // `ALTER TABLE` locks the table whole even when it changes nothing, and every append of partition 0
      // would wait behind it.
      if try await !Self.hasPartitionCountColumn(on: connection, logger: self.logger) {
        try await connection.query(
          "ALTER TABLE event_log_meta ADD COLUMN IF NOT EXISTS partition_count integer NOT NULL DEFAULT 1",
          logger: self.logger
        )
      }
      let current = Int32(Self.schemaVersion)
      let count = Int32(asked?.count ?? 1)
      // The row is partition 0's counter, which every append locks: written only when missing or older.
      if let version {
        if version != Self.schemaVersion {
          try await connection.query(
            "UPDATE event_log_meta SET schema_version = \(current) WHERE id = 1",
            logger: self.logger
          )
        }
      } else {
        try await connection.query(
          """
          INSERT INTO event_log_meta (id, schema_version, last_position, partition_count)
          VALUES (1, \(current), 0, \(count))
          """,
          logger: self.logger
        )
      }
      var partitions = 1
      let counted = try await connection.query(
        "SELECT partition_count FROM event_log_meta WHERE id = 1",
        logger: self.logger
      )
      for try await value in counted.decode(Int32.self) { partitions = Int(value) }
      if let asked, asked.count != partitions { return (Self.schemaVersion, partitions) }
      for partition in 0..<partitions {
        try await Self.createTables(LogTables(partition: partition), on: connection, logger: self.logger)
      }
      try await connection.query(
        """
        CREATE TABLE IF NOT EXISTS event_inbox (
          id bigserial PRIMARY KEY, partition integer NOT NULL, message bytea NOT NULL)
        """,
        logger: self.logger
      )
      try await connection.query(
        "CREATE INDEX IF NOT EXISTS event_inbox_by_partition ON event_inbox (partition, id)",
        logger: self.logger
      )
      // Where each node holding leases answers HTTP (its lease session's backend pid, its address).
      try await connection.query(
        "CREATE TABLE IF NOT EXISTS partition_node (pid integer PRIMARY KEY, address text NOT NULL)",
        logger: self.logger
      )
      return (Self.schemaVersion, partitions)
    }
    if found.version > Self.schemaVersion { throw .newerFormat(found: found.version, supported: Self.schemaVersion) }
    guard let map = PartitionMap(count: found.partitions) else {
      throw .storage("\(location): the log records \(found.partitions) partitions, which is not a partition count")
    }
    if let asked, asked != map { throw .partitionCount(found: map.count, asked: asked.count) }
    return map
  }

  /// Creates a partition's tables when missing (partition 0's counter row exists already).
  static func createTables(
    _ tables: LogTables,
    on connection: PostgresConnection,
    logger: Logger
  ) async throws {
    if tables.partition > 0 {
      try await connection.query(
        """
        CREATE TABLE IF NOT EXISTS \(unescaped: tables.meta) (
          id integer PRIMARY KEY CHECK (id = 1), last_position bigint NOT NULL)
        """,
        logger: logger
      )
      try await connection.query(
        "INSERT INTO \(unescaped: tables.meta) (id, last_position) VALUES (1, 0) ON CONFLICT (id) DO NOTHING",
        logger: logger
      )
    }
    try await connection.query(
      """
      CREATE TABLE IF NOT EXISTS \(unescaped: tables.records) (
        position bigint PRIMARY KEY, record bytea NOT NULL)
      """,
      logger: logger
    )
    try await connection.query(
      """
      CREATE TABLE IF NOT EXISTS \(unescaped: tables.snapshot) (
        id integer PRIMARY KEY CHECK (id = 1), position bigint NOT NULL, state bytea NOT NULL)
      """,
      logger: logger
    )
  }

  /// The partition count when the schema is this build's and every table and index of it exists (and the
  /// count is the one `asked`, if any); `nil` when set-up has something to do. Reads only.
  static func currentSchema(
    asked: PartitionMap?,
    on connection: PostgresConnection,
    logger: Logger
  ) async throws -> Int? {
    guard try await hasPartitionCountColumn(on: connection, logger: logger) else { return nil }
    var found: (version: Int, partitions: Int)?
    let rows = try await connection.query(
      "SELECT schema_version, partition_count FROM event_log_meta WHERE id = 1",
      logger: logger
    )
    for try await (version, partitions) in rows.decode((Int32, Int32).self) {
      found = (Int(version), Int(partitions))
    }
    guard let found, found.version == schemaVersion, found.partitions >= 1 else { return nil }
    if let asked, asked.count != found.partitions { return nil }
    var names = [LogTables.inbox, "event_inbox_by_partition", "partition_node"]
    for partition in 0..<found.partitions {
      let tables = LogTables(partition: partition)
      names += [tables.meta, tables.records, tables.snapshot]
    }
    // Names this build makes: letters, digits and underscores only.
    let list = names.map { "'\($0)'" }.joined(separator: ", ")
    let missing = try await connection.query(
      "SELECT count(*) FROM unnest(ARRAY[\(unescaped: list)]) AS name WHERE to_regclass(name) IS NULL",
      logger: logger
    )
    var count = 1
    for try await value in missing.decode(Int.self) { count = value }
    return count == 0 ? found.partitions : nil
  }

  /// Whether `event_log_meta` has schema 2's `partition_count` column (false too when the table is missing).
  static func hasPartitionCountColumn(on connection: PostgresConnection, logger: Logger) async throws -> Bool {
    try await bool(
      """
      SELECT count(*) > 0 FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = 'event_log_meta' AND column_name = 'partition_count'
      """,
      on: connection,
      logger: logger
    )
  }
}
