import EventServer
import Foundation
import PostgresServerLog
import SQLiteServerLog
import Testing

/// Where a stored application's test keeps its database: SQLite in a scratch folder, or a scratch
/// PostgreSQL database (when `EVENT_SERVER_TEST_POSTGRES_URL` is set). Opened again after a "restart".
enum StoredBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case sqlite
  case postgres

  var testDescription: String { rawValue }

  /// The backends this run can use: SQLite always, PostgreSQL when a server was given.
  static var available: [StoredBackend] { testPostgresURL == nil ? [.sqlite] : [.sqlite, .postgres] }

  /// A fresh, empty place for a database of this backend.
  func scratch() async throws -> StoredDatabase {
    switch self {
    case .sqlite:
      let folder = FileManager.default.temporaryDirectory.appendingPathComponent("stored-\(UUID())")
      return StoredDatabase(backend: self, location: folder.appendingPathComponent("event-server.sqlite").path)
    case .postgres:
      let database = try await ScratchDatabase.create()
      return StoredDatabase(backend: self, location: database.url)
    }
  }
}

/// One scratch database, opened as a log as often as a test restarts its server.
struct StoredDatabase: Sendable {
  let backend: StoredBackend
  /// The SQLite file's path, or the PostgreSQL URL.
  let location: String

  /// Opens the log (the caller closes it with ``close(_:)``).
  func open() async throws -> any TransactionalServerLog {
    switch backend {
    case .sqlite: try await SQLiteServerLog.open(path: location)
    case .postgres:
      try await PostgresServerLog.connect(
        url: location,
        logger: quietLogger,
        operationTimeout: testTimeout(.seconds(5))
      )
    }
  }

  /// Closes a log this database opened.
  func close(_ log: any TransactionalServerLog) async {
    if let sqlite = log as? SQLiteServerLog { await sqlite.close() }
    if let postgres = log as? PostgresServerLog { await postgres.close() }
  }

  /// Runs `body` in a transaction of a log opened for it (the truth tests compare clients with); the server
  /// must be stopped first when the backend is SQLite (one process, one connection).
  func read<T: Sendable>(_ body: @escaping @Sendable (any DatabaseTransaction) async throws -> T) async throws -> T {
    let log = try await open()
    do {
      let value = try await log.transaction { try await body($0) }
      await close(log)
      return value
    } catch {
      await close(log)
      throw error
    }
  }
}
