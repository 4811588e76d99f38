import Foundation

/// The SQL a stored application speaks: which database runs its statements.
///
/// SQLite and PostgreSQL differ in types (`INTEGER` and `bigint`, `BLOB` and `bytea`) and in some syntax; an
/// application that serves both writes its statements for each, or keeps to what both accept.
public enum SQLDialect: Sendable, Hashable {
  /// SQLite: the embedded default of `event-server --data-dir`.
  case sqlite
  /// PostgreSQL: `event-server --postgres URL`.
  case postgres
}

/// One value bound into a statement or read from a row.
public enum SQLValue: Sendable, Hashable {
  /// SQL `NULL`.
  case null
  /// An integer (SQLite `INTEGER`; PostgreSQL `smallint`, `integer`, `bigint`, and `boolean` as 0 or 1).
  case integer(Int64)
  /// A floating-point number (`REAL`, `double precision`).
  case real(Double)
  /// Text (`TEXT`, `text`, `varchar`).
  case text(String)
  /// Bytes (`BLOB`, `bytea`).
  case blob(Data)

  /// The integer, when the value is one.
  public var integer: Int64? {
    if case .integer(let value) = self { value } else { nil }
  }

  /// The text, when the value is some.
  public var text: String? {
    if case .text(let value) = self { value } else { nil }
  }

  /// The bytes, when the value is a blob.
  public var blob: Data? {
    if case .blob(let value) = self { value } else { nil }
  }

  /// Whether the value is SQL `NULL`.
  public var isNull: Bool { self == .null }
}

/// One row a statement returned: its values by column name.
public struct SQLRow: Sendable, Hashable {
  /// The columns, in the statement's order.
  public var columns: [String]
  /// The values, one per column.
  public var values: [SQLValue]

  /// A row of `values` under `columns`.
  public init(columns: [String], values: [SQLValue]) {
    precondition(columns.count == values.count, "one value per column")
    self.columns = columns
    self.values = values
  }

  /// The value of column `name`, or `nil` when the row has no such column.
  public subscript(_ name: String) -> SQLValue? {
    guard let index = columns.firstIndex(of: name) else { return nil }
    return values[index]
  }
}

/// Why a statement of a stored application failed: the database refused it or could not be reached. The
/// transaction it ran in is rolled back: no change, no event, no decision.
public struct DatabaseError: Error, Hashable, Sendable, CustomStringConvertible {
  /// What the database said, with the statement's first words.
  public var detail: String
  /// Whether the database refused the statement because a transaction running at the same time changed
  /// what this one read or wants to change (PostgreSQL's `serialization_failure`, SQLSTATE `40001`, and
  /// `deadlock_detected`, `40P01`). The same input run again in a later transaction can succeed: a cluster
  /// node whose turns run concurrently with other partitions' (``PartitionedSharedLog``) runs it again in
  /// its next turn instead of failing it.
  public var isSerializationFailure: Bool

  /// An error described by `detail`.
  /// - Parameters:
  ///   - detail: What the database said.
  ///   - isSerializationFailure: Whether a concurrent transaction caused it (see ``isSerializationFailure``).
  public init(_ detail: String, isSerializationFailure: Bool = false) {
    self.detail = detail
    self.isSerializationFailure = isSerializationFailure
  }

  public var description: String { "database: \(detail)" }
}

/// An open database transaction, as a stored application sees it: statements run in it see its own
/// changes, and commit or roll back with it (and with the event log's records of the same input).
///
/// Placeholders are `?`, in order, whatever the dialect (PostgreSQL's `$1`, `$2`… are written for you).
///
/// ```swift
/// let rows = try await transaction.execute("SELECT text FROM notes WHERE owner = ?", [.text("alice")])
/// let texts = rows.compactMap { $0["text"]?.text }
/// ```
public protocol DatabaseTransaction: Sendable {
  /// Which database runs the statements.
  var dialect: SQLDialect { get }

  /// Runs one statement with `values` bound to its `?` placeholders, and returns the rows it produced.
  /// - Throws: ``DatabaseError`` when the database refuses the statement or cannot be reached; the whole
  ///   transaction then rolls back.
  @discardableResult
  func execute(_ sql: String, _ values: [SQLValue]) async throws(DatabaseError) -> [SQLRow]
}

extension DatabaseTransaction {
  /// Runs one statement without values.
  /// - Throws: ``DatabaseError``, as ``execute(_:_:)``.
  @discardableResult
  public func execute(_ sql: String) async throws(DatabaseError) -> [SQLRow] {
    try await execute(sql, [])
  }
}

/// The transaction a stored input runs in, as the server sees it: the application's statements and the
/// input log's records, committed together.
public protocol LogTransaction: DatabaseTransaction {
  /// Appends records to the input log inside this transaction (they are durable when it commits).
  /// - Throws: ``ServerLogError`` when they could not be written; the transaction then rolls back.
  func append(_ records: [StoredRecord]) async throws(ServerLogError)
}

/// An input log kept in a database that a stored application's tables share, so one transaction covers
/// an input's table changes and its log records: the SQLite and PostgreSQL logs of the `Server/` package.
public protocol TransactionalServerLog: MigratingServerLog {
  /// Which database it is.
  var dialect: SQLDialect { get }

  /// Runs `body` in one write transaction, and commits when it returns (rolls back when it throws).
  /// - Returns: What `body` returned, once committed.
  /// - Throws: What `body` threw (rolled back), or ``ServerLogError`` when the transaction could not begin
  ///   or commit; after a failed commit it may or may not be durable (an answer lost on the way), and the
  ///   server stops, to recover from what the database holds.
  func transaction<Result: Sendable>(
    _ body: @escaping @Sendable (any LogTransaction) async throws -> Result
  ) async throws -> Result
}

/// A log several nodes share whose turns are database transactions a stored application's statements can
/// run in: the PostgreSQL log of the `Server/` package. A cluster node serving a ``StoredApplication`` runs
/// its stored inputs in its turn, holding the append lock, after applying what the other nodes committed.
public protocol TransactionalSharedLog: SharedServerLog, TransactionalServerLog {
  /// One turn (see ``SharedServerLog/appendTurn(after:_:)``) whose `decide` also gets the turn's open
  /// transaction; what it writes there commits with the turn's records. `isolation` says what the turn's
  /// statements see of other transactions committing meanwhile (``TurnIsolation``).
  func appendTurn(
    after position: UInt64,
    isolation: TurnIsolation,
    inTransaction decide:
      @escaping @Sendable ([StoredRecord], any LogTransaction) async throws(ServerLogError) ->
      [StoredRecord]
  ) async throws(ServerLogError)
}

/// What the statements of a cluster node's turn see of the other transactions that commit while it runs.
///
/// On a log of one partition every turn holds the log's append lock, so no other turn writes meanwhile and
/// both read the same. On a ``PartitionedSharedLog`` the other partitions' turns commit at any time, writing
/// tables this partition's users share, and leaving messages in its inbox.
public enum TurnIsolation: Sendable, Hashable {
  /// Each statement sees what committed before it began (PostgreSQL's READ COMMITTED): a write to a row
  /// another transaction changed waits for it and applies to its result, so writes to shared rows never
  /// conflict. What a turn of writes runs in.
  case eachStatement
  /// The whole turn sees one snapshot (REPEATABLE READ): the inbox it takes holds exactly the messages of
  /// the commits its reads see, so a registration's snapshot is atomic with its queue. A write to a row
  /// another transaction changed since the snapshot is refused (``DatabaseError/isSerializationFailure``),
  /// and runs again in the next turn. What a turn with a registration, a fetch or a read runs in.
  case oneSnapshot
}
