import EventServer
import Foundation
import SQLiteNIO

extension SQLiteServerLog: MigratingServerLog {
  /// The table where an application's applied migrations are recorded, beside the event log's tables.
  public static var migrationsTable: String { "app_schema_migrations" }

  /// Brings the application's own tables to the last version of `migrations`: each pending migration runs in
  /// its own transaction with the row recording it, so a migration is applied whole or not at all, and one
  /// that fails leaves the database at the version before it.
  /// - Returns: The versions before and after, and what was applied.
  /// - Throws: ``MigrationError``: `newerDatabase` or `mismatch` (nothing changed), `failed` (that migration
  ///   rolled back, earlier ones kept), `storage`.
  @discardableResult
  public func migrate(_ migrations: [SchemaMigration]) async throws(MigrationError) -> MigrationReport {
    let table = Self.migrationsTable
    try await execute(
      "CREATE TABLE IF NOT EXISTS \(table) (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    let applied = try await appliedMigrations()
    let pending = try MigrationPlan.pending(migrations, applied: applied)
    for migration in pending {
      try await execute("BEGIN IMMEDIATE")
      do throws(MigrationError) {
        for statement in migration.sqlite { try await execute(statement, migration: migration) }
        try await execute(
          "INSERT INTO \(table) (version, name, applied_at) VALUES (?, ?, ?)",
          [.integer(migration.version), .text(migration.name), .text(Date().formatted(.iso8601))],
          migration: migration
        )
        try await execute("COMMIT", migration: migration)
      } catch {
        try? await execute("ROLLBACK")
        throw error
      }
    }
    return MigrationReport(from: applied.count, to: migrations.count, applied: pending.map(\.version))
  }

  /// The migrations this database recorded, in version order.
  public func appliedMigrations() async throws(MigrationError) -> [AppliedMigration] {
    let rows: [SQLiteRow]
    do {
      rows = try await query("SELECT version, name FROM \(Self.migrationsTable) ORDER BY version")
    } catch {
      if "\(error)".contains("no such table") { return [] }
      throw MigrationError(.storage, "\(path): \(error)")
    }
    return rows.compactMap { row in
      guard let version = row.column("version")?.integer, let name = row.column("name")?.string else { return nil }
      return AppliedMigration(version: version, name: name)
    }
  }

  private func execute(
    _ sql: String,
    _ binds: [SQLiteData] = [],
    migration: SchemaMigration? = nil
  ) async throws(MigrationError) {
    do {
      _ = try await query(sql, binds)
    } catch {
      guard let migration else { throw MigrationError(.storage, "\(path): \(error)") }
      throw MigrationError(
        .failed,
        "migration \(migration.version) (\"\(migration.name)\") failed and was rolled back, the database stays at "
          + "version \(migration.version - 1): \(error)"
      )
    }
  }
}
