import EventServer
import Foundation
import SQLiteNIO
import Testing

@testable import SQLiteServerLog

/// Version 1 and 2 of a small application's tables.
let noteMigrations = [
  SchemaMigration(
    version: 1,
    name: "notes",
    sqlite: ["CREATE TABLE notes (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, text TEXT NOT NULL)"],
    postgres: ["CREATE TABLE notes (id bigserial PRIMARY KEY, owner text NOT NULL, text text NOT NULL)"]
  ),
  SchemaMigration(
    version: 2,
    name: "notes.pinned",
    sqlite: ["ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0"],
    postgres: ["ALTER TABLE notes ADD COLUMN pinned boolean NOT NULL DEFAULT false"]
  ),
]

/// Version 3, which fails halfway: its first statement succeeds, its second does not.
let failingMigration = SchemaMigration(
  version: 3,
  name: "tags",
  sqlite: ["CREATE TABLE tags (note INTEGER NOT NULL, tag TEXT NOT NULL)", "ALTER TABLE no_such_table ADD COLUMN x"],
  postgres: [
    "CREATE TABLE tags (note bigint NOT NULL, tag text NOT NULL)", "ALTER TABLE no_such_table ADD COLUMN x int",
  ]
)

@Suite("SQLite migrations: each applied once in its own transaction; a newer or failing one changes nothing")
struct SQLiteMigrationTests {
  @Test("applied in order and recorded; a failing migration rolls back whole; a newer database is refused")
  func migrations() async throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID())")
    defer { try? FileManager.default.removeItem(at: folder) }
    let path = folder.appendingPathComponent("app.sqlite").path
    let log = try await SQLiteServerLog.open(path: path)
    do {
      try await migrateAndBreak(log)
    } catch {
      await log.close()  // an open connection left to deinit stops a debug process
      throw error
    }
    await log.close()
    let reopened = try await SQLiteServerLog.open(path: path)
    do {
      #expect(try await reopened.migrate(noteMigrations).applied.isEmpty)
      let rows = try await reopened.query("SELECT text, pinned FROM notes")
      #expect(rows.map { $0.column("text")?.string } == ["hello"])
      #expect(try await reopened.load().records.map(\.position) == [1])
    } catch {
      await reopened.close()
      throw error
    }
    await reopened.close()
  }

  private func migrateAndBreak(_ log: SQLiteServerLog) async throws {
    #expect(try await log.migrate(noteMigrations) == MigrationReport(from: 0, to: 2, applied: [1, 2]))
    _ = try await log.query("INSERT INTO notes (owner, text, pinned) VALUES ('alice', 'hello', 1)")
    #expect(try await log.migrate(noteMigrations) == MigrationReport(from: 2, to: 2, applied: []))

    await #expect {
      try await log.migrate(noteMigrations + [failingMigration])
    } throws: { error in
      (error as? MigrationError)?.kind == .failed && "\(error)".contains("stays at version 2")
    }
    #expect(try await log.appliedMigrations().map(\.version) == [1, 2])
    let tags = try await log.query("SELECT name FROM sqlite_master WHERE name = 'tags'")
    #expect(tags.isEmpty, "the failing migration's first statement was rolled back with it")

    await #expect {
      try await log.migrate(Array(noteMigrations.prefix(1)))
    } throws: { error in
      (error as? MigrationError)?.kind == .newerDatabase
    }
    // The event log beside the tables is untouched, and the data is intact.
    try await log.append([StoredRecord(position: 1, bytes: ServerLogCodec.frame(Data("r1".utf8)))])
  }
}
