import EventServer
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// The log a single server appends to (``ServerLog``): loading, fenced appends, snapshots, truncation.
extension PostgresServerLog {
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
}
