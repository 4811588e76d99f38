import EventServer
import Foundation
import PostgresNIO
import TestScheduling
import Testing

@testable import PostgresServerLog

@Suite(
  "PostgreSQL migrations: once across nodes starting together; a newer or failing one changes nothing",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PostgresMigrationTests {
  @Test("three nodes migrating at once apply each migration once; a failing one rolls back; newer is refused")
  func migrations() async throws {
    let database = try await ScratchDatabase.create()
    var nodes: [PostgresServerLog] = []
    for _ in 0..<3 {
      nodes.append(
        try await PostgresServerLog.connect(
          url: database.url,
          logger: quietLogger,
          operationTimeout: testTimeout(.seconds(5))
        )
      )
    }
    let reports = try await withThrowingTaskGroup(of: MigrationReport.self) { group in
      for node in nodes { group.addTask { try await node.migrate(noteMigrations) } }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    #expect(reports.flatMap(\.applied).sorted() == [1, 2], "each migration applied by exactly one node")
    #expect(try await nodes[0].appliedMigrations().map(\.name) == ["notes", "notes.pinned"])
    try await nodes[0].client.query("INSERT INTO notes (owner, text, pinned) VALUES ('alice', 'hello', true)")

    await #expect {
      try await nodes[1].migrate(noteMigrations + [failingMigration])
    } throws: { error in
      (error as? MigrationError)?.kind == .failed && "\(error)".contains("no_such_table")
    }
    #expect(try await nodes[1].appliedMigrations().map(\.version) == [1, 2])
    let tags = try await nodes[1].client.query("SELECT to_regclass('tags') IS NOT NULL")
    for try await exists in tags.decode(Bool.self) { #expect(!exists, "rolled back with the migration") }

    await #expect {
      try await nodes[2].migrate(Array(noteMigrations.prefix(1)))
    } throws: { error in
      (error as? MigrationError)?.kind == .newerDatabase
    }
    let texts = try await nodes[2].client.query("SELECT text FROM notes")
    var found: [String] = []
    for try await text in texts.decode(String.self) { found.append(text) }
    #expect(found == ["hello"])
    for node in nodes { await node.close() }
  }
}
