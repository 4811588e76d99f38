import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Logging
import SQLiteNIO
import Testing

@testable import SQLiteServerLog

@Suite("Schema migrations at start: applied before serving; a failing one stops the start in one line")
struct MigrationsAtStartTests {
  func configuration(_ directory: URL?, _ migrations: [SchemaMigration]) throws -> EventHTTPServerConfiguration {
    var configuration = EventHTTPServerConfiguration(keys: try APIKeys(["alice": "alice-secret-key"]))
    configuration.port = 0
    configuration.adminPort = 0
    configuration.dataDirectory = directory
    configuration.snapshotInterval = nil
    configuration.migrations = migrations
    return configuration
  }

  var logger: Logger {
    var logger = Logger(label: "migrations-at-start")
    logger.logLevel = .critical
    return logger
  }

  @Test("migrated at the first start, started again on the migrated database; a failing one: one line, version kept")
  func migrationsAtStart() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("migrate-\(UUID())")
    defer { try? FileManager.default.removeItem(at: directory) }
    for _ in 0..<2 {
      let server = EventHTTPServer(
        application: KanbanServer(team: ["alice"]),
        configuration: try configuration(directory, noteMigrations),
        logger: logger
      )
      let started = try await RunningWithAdmin.start(server)
      await server.shutdown()
      try await started.running.value
    }
    let failing = EventHTTPServer(
      application: KanbanServer(team: ["alice"]),
      configuration: try configuration(directory, noteMigrations + [failingMigration]),
      logger: logger
    )
    await #expect {
      try await failing.run(handleSignals: false)
    } throws: { error in
      let line = "\(error)"
      return line.contains("schema migrations: migration 3") && line.contains("stays at version 2")
        && !line.contains("\n")
    }
    // The failed start closed the database and released the folder: it opens, at version 2, tables intact.
    let log = try await SQLiteServerLog.open(path: try #require(failing.databaseURL).path)
    let applied = try? await log.appliedMigrations()
    let notes = try? await log.query("SELECT count(*) AS n FROM notes")
    await log.close()
    #expect(applied?.map(\.version) == [1, 2])
    #expect(notes?.first?.column("n")?.integer == 0)
  }

  @Test("migrations without a database to apply them to: refused in one line")
  func migrationsWithoutDatabase() async throws {
    let server = EventHTTPServer(
      application: KanbanServer(team: ["alice"]),
      configuration: try configuration(nil, noteMigrations),
      logger: logger
    )
    await #expect {
      try await server.run(handleSignals: false)
    } throws: { error in
      "\(error)".contains("no database to apply them to")
    }
  }
}
