import EventServer
import Foundation
import Logging
import PostgresNIO

extension PostgresServerLog: MigratingServerLog {
  /// The table where an application's applied migrations are recorded, beside the event log's tables.
  public static var migrationsTable: String { "app_schema_migrations" }

  /// The advisory lock key that serialises migrations across the nodes of a cluster starting together.
  static var migrationLockKey: Int64 { 0x6576_656E_745F_6D67 }

  /// Brings the application's own tables to the last version of `migrations`: each pending migration runs in
  /// its own transaction with the row recording it, under an advisory lock, so nodes starting together apply
  /// each migration once; one that fails is rolled back and leaves the version before it.
  /// - Returns: The versions before and after, and what this node applied.
  /// - Throws: ``MigrationError``: `newerDatabase` or `mismatch` (nothing changed), `failed` (that migration
  ///   rolled back, earlier ones kept), `storage`.
  @discardableResult
  public func migrate(_ migrations: [SchemaMigration]) async throws(MigrationError) -> MigrationReport {
    let table = Self.migrationsTable
    // Nothing pending: answered without the lock. A host taking 16 partitions starts 16 nodes at once, each
    // migrating; in turn behind the lock, the last waited past the log's 5 s deadline beside other work.
    let recorded = try await appliedMigrations()
    if recorded.count == migrations.count, try MigrationPlan.pending(migrations, applied: recorded).isEmpty {
      return MigrationReport(from: recorded.count, to: migrations.count, applied: [])
    }
    try await inTransaction(nil) { connection in
      try await connection.query(
        "SELECT pg_advisory_xact_lock(\(Self.migrationLockKey))",
        logger: self.logger
      )
      try await connection.query(
        """
        CREATE TABLE IF NOT EXISTS app_schema_migrations (
          version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
        """,
        logger: self.logger
      )
    }
    let before = try await appliedMigrations()
    _ = try MigrationPlan.pending(migrations, applied: before)
    var applied: [Int] = []
    for migration in migrations.dropFirst(before.count) {
      let didApply = try await inTransaction(migration) { connection -> Bool in
        try await connection.query("SELECT pg_advisory_xact_lock(\(Self.migrationLockKey))", logger: self.logger)
        // Another node may have applied it while this one waited for the lock.
        let rows = try await connection.query(
          "SELECT count(*) FROM \(unescaped: table) WHERE version = \(migration.version)",
          logger: self.logger
        )
        var count: Int64 = 0
        for try await value in rows.decode(Int64.self) { count = value }
        guard count == 0 else { return false }
        for statement in migration.postgres {
          try await connection.query(PostgresQuery(unsafeSQL: statement), logger: self.logger)
        }
        try await connection.query(
          "INSERT INTO \(unescaped: table) (version, name) VALUES (\(migration.version), \(migration.name))",
          logger: self.logger
        )
        return true
      }
      if didApply { applied.append(migration.version) }
    }
    // What another node applied meanwhile must be this build's migrations too.
    _ = try MigrationPlan.pending(migrations, applied: try await appliedMigrations())
    return MigrationReport(from: before.count, to: migrations.count, applied: applied)
  }

  /// The migrations this database recorded, in version order.
  public func appliedMigrations() async throws(MigrationError) -> [AppliedMigration] {
    try await inTransaction(nil) { connection in
      let exists = try await connection.query(
        "SELECT to_regclass(\(Self.migrationsTable)) IS NOT NULL",
        logger: self.logger
      )
      var found = false
      for try await value in exists.decode(Bool.self) { found = value }
      guard found else { return [] }
      let rows = try await connection.query(
        "SELECT version, name FROM \(unescaped: Self.migrationsTable) ORDER BY version",
        logger: self.logger
      )
      var applied: [AppliedMigration] = []
      for try await (version, name) in rows.decode((Int32, String).self) {
        applied.append(AppliedMigration(version: Int(version), name: name))
      }
      return applied
    }
  }

  /// Runs `body` in a transaction, without the log's deadline (a migration may rewrite a large table; it
  /// runs at start, before any request); a failure is the migration's (rolled back) when `migration` is
  /// given, the database's otherwise.
  private func inTransaction<Result: Sendable>(
    _ migration: SchemaMigration?,
    _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
  ) async throws(MigrationError) -> Result {
    do {
      return try await client.withTransaction(logger: logger) { connection in try await body(connection) }
    } catch {
      // PostgresNIO hides the server's message from `description`; an operator needs it here.
      let reason = (error as? PSQLError)?.serverInfo?[.message] ?? String(reflecting: error)
      guard let migration else { throw MigrationError(.storage, "\(location): \(reason)") }
      throw MigrationError(
        .failed,
        "migration \(migration.version) (\"\(migration.name)\") failed and was rolled back, the database stays at "
          + "version \(migration.version - 1): \(reason)"
      )
    }
  }
}
