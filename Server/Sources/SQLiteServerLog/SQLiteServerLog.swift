import EventProtocol
import EventServer
import Foundation
import NIOCore
import SQLiteNIO

/// The embedded default ``ServerLog``: the input log and the newest snapshot in one SQLite database, in WAL
/// mode with `synchronous = FULL`, so a committed transaction survives a crash of the process and a loss of
/// power. Each group-commit write is one transaction (one sync).
///
/// Tables: `log(position INTEGER PRIMARY KEY, record BLOB)`, `snapshot(id = 1, position, state BLOB)` and
/// `previous_snapshot` (the one before, kept with the records after it, so a damaged newest snapshot can be
/// replaced); `PRAGMA user_version` holds the schema version, and a database of a newer schema is refused.
/// While open, the log holds an exclusive lock on `<path>.lock`: a second process opening the same database
/// is refused with ``ServerLogError/inUse(_:)``.
///
/// ```swift
/// let log = try await SQLiteServerLog.open(path: "data/event-server.sqlite")
/// let (server, _) = try await EventServer.recovering(from: log, application: app, clock: ContinuousClock())
/// ```
public final class SQLiteServerLog: ServerLog {
  /// The schema this build creates and reads.
  public static var schemaVersion: Int { 2 }
  /// Rows per `INSERT` statement (each binds two values; SQLite allows 32,766).
  static var rowsPerStatement: Int { 500 }

  private let connection: SQLiteConnection
  /// The lock beside the database (`<path>.lock`), held while the log is open: one process at a time.
  private let lock: ExclusiveFileLock
  /// The database file.
  public let path: String
  /// The statements running on the connection; closed by ``close()``, which waits for them.
  private let use = ConnectionUse()

  private init(connection: SQLiteConnection, lock: ExclusiveFileLock, path: String) {
    self.connection = connection
    self.lock = lock
    self.path = path
  }

  /// Opens (creating when missing) the database at `path`, its folder included.
  /// - Throws: ``ServerLogError/newerFormat(found:supported:)`` for a database of a newer schema (left as
  ///   it is), ``ServerLogError/storage(_:)`` when it cannot be opened or set up.
  public static func open(path: String) async throws(ServerLogError) -> SQLiteServerLog {
    do {
      try FileManager.default.createDirectory(
        at: URL(fileURLWithPath: path).deletingLastPathComponent(),
        withIntermediateDirectories: true
      )
    } catch {
      throw .storage("cannot create the folder of \(path): \(error)")
    }
    // One process at a time: a second server on the same file would interleave its snapshots and records with
    // the first's (an idle one's stale snapshot replacing a newer one's). Released when the process dies.
    let lock: ExclusiveFileLock
    do {
      lock = try ExclusiveFileLock.acquire(path: path + ".lock")
    } catch {
      throw error.isHeldElsewhere ? .inUse("\(error): stop it first (one server per database)") : .storage("\(error)")
    }
    let connection: SQLiteConnection
    do {
      connection = try await SQLiteConnection.open(storage: .file(path: path))
    } catch {
      lock.release()
      throw .storage("cannot open \(path): \(error)")
    }
    let log = SQLiteServerLog(connection: connection, lock: lock, path: path)
    do {
      try await log.setUp()
    } catch {
      await log.close()
      throw error
    }
    return log
  }

  private func setUp() async throws(ServerLogError) {
    let version = try await run("PRAGMA user_version").first?.column("user_version")?.integer ?? 0
    guard version <= Self.schemaVersion else {
      throw .newerFormat(found: version, supported: Self.schemaVersion)
    }
    // WAL keeps readers off the writer's path; FULL syncs the WAL at every commit: a committed write survives
    // power loss (NORMAL would only survive a crash of the process).
    _ = try await run("PRAGMA journal_mode = WAL")
    _ = try await run("PRAGMA synchronous = FULL")
    _ = try await run("CREATE TABLE IF NOT EXISTS log (position INTEGER PRIMARY KEY, record BLOB NOT NULL)")
    _ = try await run(
      "CREATE TABLE IF NOT EXISTS snapshot (id INTEGER PRIMARY KEY CHECK (id = 1), position INTEGER NOT NULL, state BLOB NOT NULL)"
    )
    // Version 2: the snapshot before the newest is kept, with the records after it, so a damaged newest one
    // (its checksum fails) is replaced by it at the next start.
    _ = try await run(
      "CREATE TABLE IF NOT EXISTS previous_snapshot (id INTEGER PRIMARY KEY CHECK (id = 1), position INTEGER NOT NULL, state BLOB NOT NULL)"
    )
    if version < Self.schemaVersion { _ = try await run("PRAGMA user_version = \(Self.schemaVersion)") }
  }

  /// Closes the database once the statements under way have ended; a statement issued from then on fails
  /// with ``ServerLogError/storage(_:)``. Closing it again does nothing (a second close of the connection
  /// crashed).
  public func close() async {
    guard await use.close() else { return }
    try? await connection.close()
    lock.release()
  }

  public func load() async throws(ServerLogError) -> StoredLog {
    let snapshot = try await storedSnapshot(in: "snapshot")
    let previous = try await storedSnapshot(in: "previous_snapshot")
    let rows = try await run(
      "SELECT position, record FROM log WHERE position > ? ORDER BY position",
      [.integer(Int(previous?.position ?? snapshot?.position ?? 0))]
    )
    var records: [StoredRecord] = []
    records.reserveCapacity(rows.count)
    for row in rows {
      records.append(StoredRecord(position: try position(of: row), bytes: try bytes(of: row, column: "record")))
    }
    // A row is written whole or not at all: a last record failing its checksum is damage, not a cut write.
    return StoredLog(snapshot: snapshot, records: records, previousSnapshot: previous, lastRecordCanTear: false)
  }

  private func storedSnapshot(in table: String) async throws(ServerLogError) -> StoredSnapshot? {
    guard let row = try await run("SELECT position, state FROM \(table) WHERE id = 1").first else { return nil }
    return StoredSnapshot(position: try position(of: row), bytes: try bytes(of: row, column: "state"))
  }

  public func append(_ records: [StoredRecord]) async throws(ServerLogError) {
    guard !records.isEmpty else { return }
    // A group that fits one statement is written by that statement alone: SQLite runs it as its own
    // transaction (all rows or none, one sync), one call to the database instead of three. A larger group
    // needs several statements and an explicit transaction around them.
    if records.count <= Self.rowsPerStatement {
      try await insert(records[...])
      return
    }
    try await transaction { () async throws(ServerLogError) in
      var start = 0
      while start < records.count {
        let end = min(start + Self.rowsPerStatement, records.count)
        try await insert(records[start..<end])
        start = end
      }
    }
  }

  /// One `INSERT` of `chunk`; a position already taken fails the whole statement: positions are never
  /// overwritten.
  func insert(_ chunk: ArraySlice<StoredRecord>) async throws(ServerLogError) {
    let placeholders = Array(repeating: "(?, ?)", count: chunk.count).joined(separator: ", ")
    var binds: [SQLiteData] = []
    binds.reserveCapacity(chunk.count * 2)
    for record in chunk {
      binds.append(.integer(Int(record.position)))
      binds.append(.blob(ByteBuffer(bytes: record.bytes)))
    }
    _ = try await run("INSERT INTO log (position, record) VALUES \(placeholders)", binds)
  }

  public func saveSnapshot(_ snapshot: StoredSnapshot) async throws(ServerLogError) {
    // The newest becomes the previous one, and only the records it covers go: the previous snapshot and the
    // records after it stay, in case the new one is found damaged at the next start.
    try await transaction { () async throws(ServerLogError) in
      _ = try await run(
        "INSERT OR REPLACE INTO previous_snapshot (id, position, state) SELECT 1, position, state FROM snapshot WHERE id = 1"
      )
      _ = try await run(
        "INSERT OR REPLACE INTO snapshot (id, position, state) VALUES (1, ?, ?)",
        [.integer(Int(snapshot.position)), .blob(ByteBuffer(bytes: snapshot.bytes))]
      )
      _ = try await run(
        "DELETE FROM log WHERE position <= (SELECT position FROM previous_snapshot WHERE id = 1)"
      )
    }
  }

  public func truncate(after position: UInt64) async throws(ServerLogError) {
    _ = try await run("DELETE FROM log WHERE position > ?", [.integer(Int(position))])
  }

  // MARK: - Helpers

  private func transaction(_ body: () async throws(ServerLogError) -> Void) async throws(ServerLogError) {
    _ = try await run("BEGIN IMMEDIATE")
    do {
      try await body()
      _ = try await run("COMMIT")
    } catch {
      _ = try? await run("ROLLBACK")
      throw error
    }
  }

  func run(_ sql: String, _ binds: [SQLiteData] = []) async throws(ServerLogError) -> [SQLiteRow] {
    do {
      return try await query(sql, binds)
    } catch let error as ServerLogError {
      throw error
    } catch {
      throw .storage("\(path): \(error)")
    }
  }

  /// Runs one statement on the log's connection (the migrations' runner uses it), unless the log is closing.
  /// - Throws: ``ServerLogError/storage(_:)`` once ``close()`` has begun; what SQLite threw.
  func query(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [SQLiteRow] {
    guard use.enter() else { throw ServerLogError.storage("\(path) is closed") }
    defer { use.leave() }
    return try await connection.query(sql, binds)
  }

  /// The statements running on the connection now (for tests).
  var statementsUnderWay: Int { use.runningCount }

  private func position(of row: SQLiteRow) throws(ServerLogError) -> UInt64 {
    guard let value = row.column("position")?.integer, value >= 0 else {
      throw .undecodable("\(path): a row without a position")
    }
    return UInt64(value)
  }

  private func bytes(of row: SQLiteRow, column: String) throws(ServerLogError) -> Data {
    guard case .blob(let buffer) = row.column(column) else {
      throw .undecodable("\(path): a row whose \(column) is not a blob")
    }
    return Data(buffer.readableBytesView)
  }
}
