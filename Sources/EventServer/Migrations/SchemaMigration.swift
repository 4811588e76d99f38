/// One change to the schema of an application's own tables, in the database that also holds its event log:
/// applied once, at start, in its own transaction, and recorded with its version.
///
/// A stored application lists its migrations in order, versions 1, 2, 3… without a gap; a migration once
/// released is never edited (the database records its name, and a different name at the same version is
/// refused). Each backend has its own SQL, since SQLite and PostgreSQL differ in types and `ALTER TABLE`.
///
/// ```swift
/// let migrations = [
///   SchemaMigration(
///     version: 1,
///     name: "notes",
///     sqlite: ["CREATE TABLE notes (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, text TEXT NOT NULL)"],
///     postgres: ["CREATE TABLE notes (id bigserial PRIMARY KEY, owner text NOT NULL, text text NOT NULL)"]
///   ),
///   SchemaMigration(
///     version: 2,
///     name: "notes.pinned",
///     sqlite: ["ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0"],
///     postgres: ["ALTER TABLE notes ADD COLUMN pinned boolean NOT NULL DEFAULT false"]
///   ),
/// ]
/// ```
public struct SchemaMigration: Sendable, Hashable {
  /// Its place in the list: 1 for the first, then one more for each.
  public var version: Int
  /// A short name, recorded with the version (what an operator reads in the migrations table).
  public var name: String
  /// The statements on SQLite, run in order in one transaction.
  public var sqlite: [String]
  /// The statements on PostgreSQL, run in order in one transaction.
  public var postgres: [String]

  /// A migration to `version`, named `name`, with each backend's statements.
  public init(version: Int, name: String, sqlite: [String], postgres: [String]) {
    self.version = version
    self.name = name
    self.sqlite = sqlite
    self.postgres = postgres
  }
}

/// A migration the database has recorded: its version and name.
public struct AppliedMigration: Sendable, Hashable {
  /// The version applied.
  public var version: Int
  /// The name it was applied under.
  public var name: String

  /// A record of migration `version`, applied as `name`.
  public init(version: Int, name: String) {
    self.version = version
    self.name = name
  }
}

/// Why an application's migrations were not applied. Nothing is changed by a refusal, and a migration that
/// fails leaves the database at the version before it.
public struct MigrationError: Error, Hashable, Sendable, CustomStringConvertible {
  /// What kind of refusal or failure.
  public enum Kind: Hashable, Sendable {
    /// The list itself is wrong (versions not 1, 2, 3…, an empty name).
    case invalidList
    /// The database was migrated by a newer build: this one does not know its schema.
    case newerDatabase
    /// The database recorded another migration at a version than the list has (a migration edited after
    /// release, or another application's database).
    case mismatch
    /// A migration's statements failed; it was rolled back.
    case failed
    /// The database could not be read or written.
    case storage
  }

  /// What kind of refusal or failure.
  public let kind: Kind
  /// One line for an operator: what, where, and what to do.
  public let description: String

  /// An error of `kind`, described by `description`.
  public init(_ kind: Kind, _ description: String) {
    self.kind = kind
    self.description = description
  }
}

/// What applying an application's migrations did.
public struct MigrationReport: Sendable, Hashable {
  /// The database's version before.
  public var from: Int
  /// Its version after (the list's last version).
  public var to: Int
  /// The versions applied now, in order (empty when the database was current).
  public var applied: [Int]

  /// A report of going from `from` to `to` by applying `applied`.
  public init(from: Int, to: Int, applied: [Int]) {
    self.from = from
    self.to = to
    self.applied = applied
  }
}

/// Decides which migrations a database needs: a pure function of the list and what the database recorded,
/// shared by the SQLite and PostgreSQL runners (which perform what it returns, each in its own transaction).
public enum MigrationPlan {
  /// The migrations still to apply, in order.
  /// - Parameters:
  ///   - migrations: The application's list, in order.
  ///   - applied: What the database recorded, in any order.
  /// - Throws: ``MigrationError`` of kind `invalidList`, `newerDatabase` or `mismatch`; nothing is to be
  ///   changed then.
  public static func pending(
    _ migrations: [SchemaMigration],
    applied: [AppliedMigration]
  ) throws(MigrationError) -> [SchemaMigration] {
    for (index, migration) in migrations.enumerated() {
      guard migration.version == index + 1 else {
        throw MigrationError(
          .invalidList,
          "migration \"\(migration.name)\" has version \(migration.version) where \(index + 1) was expected: "
            + "versions go 1, 2, 3… in order, without a gap"
        )
      }
      guard !migration.name.isEmpty else {
        throw MigrationError(.invalidList, "migration \(migration.version) has no name")
      }
    }
    let known = migrations.count
    let recorded = applied.sorted { $0.version < $1.version }
    if let newest = recorded.last, newest.version > known {
      throw MigrationError(
        .newerDatabase,
        "the database is at schema version \(newest.version) (\"\(newest.name)\"); this build knows up to \(known): "
          + "run the newer build, or restore a backup taken before the upgrade; nothing was changed"
      )
    }
    for (index, record) in recorded.enumerated() {
      guard record.version == index + 1 else {
        throw MigrationError(
          .mismatch,
          "the database records migration \(record.version) without migration \(index + 1) before it; nothing was changed"
        )
      }
      let migration = migrations[record.version - 1]
      guard record.name == migration.name else {
        throw MigrationError(
          .mismatch,
          "the database applied migration \(record.version) as \"\(record.name)\", this build has \"\(migration.name)\" "
            + "there: a released migration was edited, or this is another application's database; nothing was changed"
        )
      }
    }
    return Array(migrations.dropFirst(recorded.count))
  }
}

/// A log whose database can also hold an application's own tables, and migrate them (`SQLiteServerLog`,
/// `PostgresServerLog` in the `Server/` package): what a host applies an application's migrations through.
public protocol MigratingServerLog: ServerLog {
  /// Brings the application's tables to the last version of `migrations` (see ``MigrationPlan``).
  /// - Throws: ``MigrationError``; a refusal changes nothing, a failing migration is rolled back.
  @discardableResult
  func migrate(_ migrations: [SchemaMigration]) async throws(MigrationError) -> MigrationReport

  /// The migrations the database recorded, in version order (none before the first migration).
  /// - Throws: ``MigrationError`` of kind `storage` when the database cannot be read.
  func appliedMigrations() async throws(MigrationError) -> [AppliedMigration]
}
