import EventServer
import Foundation
import Logging
import NIOCore
import PostgresNIO

extension PostgresServerLog: TransactionalSharedLog {
  public var dialect: SQLDialect { .postgres }

  /// Runs `body` in one transaction on a connection of the pool, and commits when it returns: a stored
  /// application's statements and the records of the same input commit together, or roll back together.
  /// The whole transaction must end within ``operationTimeout`` (a database that stops answering fails the
  /// input instead of holding it).
  ///
  /// The records are appended under the fence of a single server's log (the `event_log_meta` row must be at
  /// the position before them), so a second server appending to the same database fails instead of
  /// interleaving.
  /// - Throws: What `body` threw (rolled back), or ``ServerLogError/storage(_:)`` when the transaction could
  ///   not begin or commit in time.
  public func transaction<Result: Sendable>(
    _ body: @escaping @Sendable (any LogTransaction) async throws -> Result
  ) async throws -> Result {
    let location = location
    let outcome: Swift.Result<Result, any Error> = try await withDeadline {
      do {
        return .success(
          try await self.client.withTransaction(logger: self.logger) { connection in
            try await body(PostgresLogTransaction(log: self, connection: connection))
          }
        )
      } catch let error as PostgresTransactionError {
        // What the body threw comes back as it was (a rejection, a refused statement); a transaction that
        // could not begin or commit is the log's failure.
        if let thrown = error.closureError, error.commitError == nil, error.beginError == nil {
          return .failure(thrown)
        }
        return .failure(ServerLogError.storage("\(location): the transaction failed: \(String(reflecting: error))"))
      } catch {
        return .failure(error)
      }
    }
    return try outcome.get()
  }

  /// Appends `records` in the open transaction on `connection`, fenced and with the notification of a
  /// group commit.
  func append(_ records: [StoredRecord], on connection: PostgresConnection) async throws(ServerLogError) {
    guard let first = records.first?.position else { return }
    var inserted: Int64 = 0
    do {
      let rows = try await connection.query(Self.fencedAppend(records, tables: tables), logger: logger)
      for try await count in rows.decode(Int64.self) { inserted = count }
    } catch {
      throw .storage("\(location): \(String(reflecting: error))")
    }
    guard inserted == Int64(records.count) else { throw Self.positionTaken(first, at: location) }
  }
}

/// An open transaction of the PostgreSQL log, as a stored application and the server use it.
struct PostgresLogTransaction: LogTransaction {
  let log: PostgresServerLog
  let connection: PostgresConnection

  var dialect: SQLDialect { .postgres }

  func execute(_ sql: String, _ values: [SQLValue]) async throws(DatabaseError) -> [SQLRow] {
    do {
      var bindings = PostgresBindings(capacity: values.count)
      for value in values {
        switch value {
        case .null: bindings.appendNull()
        case .integer(let integer): bindings.append(integer)
        case .real(let real): bindings.append(real)
        case .text(let text): bindings.append(text)
        case .blob(let data): bindings.append(ByteBuffer(bytes: data))
        }
      }
      let query = PostgresQuery(unsafeSQL: Self.numberingPlaceholders(sql), binds: bindings)
      let rows = try await connection.query(query, logger: log.logger)
      var result: [SQLRow] = []
      for try await row in rows {
        var names: [String] = []
        var cells: [SQLValue] = []
        for cell in row {
          names.append(cell.columnName)
          cells.append(try Self.value(of: cell))
        }
        result.append(SQLRow(columns: names, values: cells))
      }
      return result
    } catch {
      let state = (error as? PSQLError)?.serverInfo?[.sqlState]
      throw DatabaseError(
        "\(String(reflecting: error)) in \(sql.prefix(80))",
        isSerializationFailure: state.map(Self.serializationFailures.contains) ?? false
      )
    }
  }

  func append(_ records: [StoredRecord]) async throws(ServerLogError) {
    try await log.append(records, on: connection)
  }

  /// The SQLSTATEs of a statement refused for a concurrent transaction: `serialization_failure` and
  /// `deadlock_detected` (a later transaction may succeed).
  static let serializationFailures: Set<String> = ["40001", "40P01"]

  /// `?` placeholders, in order, as PostgreSQL's `$1`, `$2`…; a `?` inside a quoted string or identifier
  /// is left alone.
  static func numberingPlaceholders(_ sql: String) -> String {
    var result = ""
    result.reserveCapacity(sql.utf8.count + 8)
    var number = 0
    var quote: Character?
    for character in sql {
      if let open = quote {
        if character == open { quote = nil }
        result.append(character)
      } else if character == "'" || character == "\"" {
        quote = character
        result.append(character)
      } else if character == "?" {
        number += 1
        result += "$\(number)"
      } else {
        result.append(character)
      }
    }
    return result
  }

  static func value(of cell: PostgresCell) throws -> SQLValue {
    guard cell.bytes != nil else { return .null }
    switch cell.dataType {
    case .int2: return .integer(Int64(try cell.decode(Int16.self)))
    case .int4: return .integer(Int64(try cell.decode(Int32.self)))
    case .int8: return .integer(try cell.decode(Int64.self))
    case .bool: return .integer(try cell.decode(Bool.self) ? 1 : 0)
    case .float4: return .real(Double(try cell.decode(Float.self)))
    case .float8: return .real(try cell.decode(Double.self))
    case .bytea: return .blob(Data(try cell.decode(ByteBuffer.self).readableBytesView))
    default: return .text(try cell.decode(String.self))
    }
  }
}
