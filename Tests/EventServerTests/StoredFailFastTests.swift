import EventProtocol
import Foundation
import SampleApps
import Synchronization
import Testing
import UpdateMachineTesting

@testable import EventServer

/// A transactional log in memory whose database can be made unreachable: its transactions then fail before
/// the application runs. Counts the transactions begun.
final class UnreachableTransactionalLog: TransactionalServerLog {
  let records = InMemoryServerLog()
  private let state = Mutex((unreachable: false, begun: 0))

  var dialect: SQLDialect { .sqlite }
  var begun: Int { state.withLock { $0.begun } }

  func setUnreachable(_ unreachable: Bool) { state.withLock { $0.unreachable = unreachable } }

  func load() async throws(ServerLogError) -> StoredLog { try records.load() }
  func append(_ records: [StoredRecord]) async throws(ServerLogError) { try self.records.append(records) }
  func saveSnapshot(_ snapshot: StoredSnapshot) async throws(ServerLogError) { try records.saveSnapshot(snapshot) }
  func truncate(after position: UInt64) async throws(ServerLogError) { try records.truncate(after: position) }
  func migrate(_ migrations: [SchemaMigration]) async throws(MigrationError) -> MigrationReport {
    MigrationReport(from: migrations.count, to: migrations.count, applied: [])
  }
  func appliedMigrations() async throws(MigrationError) -> [AppliedMigration] { [] }

  func transaction<Result: Sendable>(
    _ body: @escaping @Sendable (any LogTransaction) async throws -> Result
  ) async throws -> Result {
    let unreachable = state.withLock { state in
      state.begun += 1
      return state.unreachable
    }
    if unreachable { throw ServerLogError.storage("the database cannot be reached") }
    return try await body(InMemoryLogTransaction(log: records))
  }
}

/// A transaction that only appends records (the test's application runs no SQL; the server's savepoints
/// are accepted and do nothing).
struct InMemoryLogTransaction: LogTransaction {
  let log: InMemoryServerLog
  var dialect: SQLDialect { .sqlite }
  func execute(_ sql: String, _ values: [SQLValue]) async throws(DatabaseError) -> [SQLRow] {
    guard sql.contains("SAVEPOINT") else { throw DatabaseError("no SQL here") }
    return []
  }
  func append(_ records: [StoredRecord]) async throws(ServerLogError) { try log.append(records) }
}

/// A stored application with no tables: its snapshot is the user's name.
struct NameOnlyStoredApplication: StoredApplication {
  typealias Snapshot = String
  typealias Event = NoteEvent
  typealias Command = NoteBoard.Command
  var migrations: [SchemaMigration] { [] }
  func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> String { user.rawValue }
  func handle(
    _ command: NoteBoard.Command,
    from user: UserID,
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<NoteEvent>] {
    [Delivery(to: [user], event: .ping)]
  }
}

@Suite("A stored application's server while its database is unreachable")
struct StoredFailFastTests {
  @Test("one transaction waits for the database; what follows for a second fails at once; then it is tried again")
  func failFast() async throws {
    let clock = ManualClock()
    let log = UnreachableTransactionalLog()
    let (server, _) = try await EventServer.serving(NameOnlyStoredApplication(), from: log, clock: clock)
    #expect(try await server.register(user: "alice").snapshot == "alice")
    let begun = log.begun
    log.setUnreachable(true)
    await #expect(throws: ServerLogError.self) { try await server.register(user: "alice") }
    #expect(log.begun == begun + 1)
    await #expect(throws: ServerLogError.self) { try await server.register(user: "bob") }
    #expect(log.begun == begun + 1, "failed at once, without asking the database")
    #expect(await server.logFailure == nil, "nothing was decided: the server keeps serving")
    clock.advance(by: .seconds(1))
    log.setUnreachable(false)
    #expect(try await server.register(user: "bob").snapshot == "bob")
    #expect(log.begun == begun + 2)
  }
}
