import EventServer
import Foundation
import NIOCore
import SQLiteNIO

extension SQLiteServerLog: TransactionalServerLog {
  public var dialect: SQLDialect { .sqlite }

  /// Runs `body` in one `BEGIN IMMEDIATE` transaction on the log's connection, and commits when it
  /// returns: a stored application's statements and the records of the same input commit together (one
  /// sync), or roll back together.
  /// - Throws: What `body` threw (rolled back), or ``ServerLogError/storage(_:)`` when the transaction could
  ///   not begin or commit.
  public func transaction<Result: Sendable>(
    _ body: @escaping @Sendable (any LogTransaction) async throws -> Result
  ) async throws -> Result {
    _ = try await run("BEGIN IMMEDIATE")
    do {
      let result = try await body(SQLiteLogTransaction(log: self))
      _ = try await run("COMMIT")
      return result
    } catch {
      _ = try? await run("ROLLBACK")
      throw error
    }
  }
}

/// An open transaction of the SQLite log, as a stored application and the server use it.
struct SQLiteLogTransaction: LogTransaction {
  let log: SQLiteServerLog

  var dialect: SQLDialect { .sqlite }

  func execute(_ sql: String, _ values: [SQLValue]) async throws(DatabaseError) -> [SQLRow] {
    let rows: [SQLiteRow]
    do {
      rows = try await log.query(sql, values.map(Self.sqliteData))
    } catch {
      throw DatabaseError("\(error) in \(sql.prefix(80))")
    }
    return rows.map { row in
      let columns = row.columns
      return SQLRow(columns: columns.map(\.name), values: columns.map { Self.value($0.data) })
    }
  }

  func append(_ records: [StoredRecord]) async throws(ServerLogError) {
    var start = 0
    while start < records.count {
      let end = min(start + SQLiteServerLog.rowsPerStatement, records.count)
      try await log.insert(records[start..<end])
      start = end
    }
  }

  static func sqliteData(_ value: SQLValue) -> SQLiteData {
    switch value {
    case .null: .null
    case .integer(let integer): .integer(Int(integer))
    case .real(let real): .float(real)
    case .text(let text): .text(text)
    case .blob(let data): .blob(ByteBuffer(bytes: data))
    }
  }

  static func value(_ data: SQLiteData) -> SQLValue {
    switch data {
    case .null: .null
    case .integer(let integer): .integer(Int64(integer))
    case .float(let real): .real(real)
    case .text(let text): .text(text)
    case .blob(let buffer): .blob(Data(buffer.readableBytesView))
    }
  }
}
