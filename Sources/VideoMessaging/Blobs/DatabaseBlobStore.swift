import EventProtocol
import EventServer
import Foundation

/// A blob store in the tables of the database that holds the event log: every node of a cluster reads and
/// writes the same blobs, and a backup of the database holds them with the videos that name them.
///
/// Each append is a row of `blob_chunks` (the bytes at their offset) and the partial blob's length in
/// `blob_contents` moves in the same transaction, after the partial blob's row is locked (`FOR UPDATE` on
/// PostgreSQL; SQLite runs one write transaction at a time): two appends at the same offset cannot both
/// land, and a transfer killed anywhere resumes from the length committed. Completing moves the chunks from
/// the partial blob to the complete one in one transaction (replacing a complete blob of the same key), so
/// a blob appears whole or not at all. The tables come with ``StoredVideoServer/schema`` (version 2).
///
/// For a cluster on PostgreSQL (`event-server --postgres URL`, the default there); a single node on
/// SQLite keeps its blobs as files (``FileBlobStore``), where a write of video bytes does not hold up the
/// log's one writer. Each call is one transaction of the log, within its operation timeout.
///
/// ```swift
/// let blobs = DatabaseBlobStore(log: postgresLog)
/// try await blobs.append(chunk, to: key, at: try await blobs.partialLength(key))
/// ```
public struct DatabaseBlobStore: BlobStore {
  /// The database, through its log's transactions.
  public let log: any TransactionalServerLog

  /// A store in the tables of `log`'s database (migrated by ``StoredVideoServer/schema``).
  public init(log: any TransactionalServerLog) {
    self.log = log
  }

  public func partialLength(_ key: BlobKey) async throws(BlobStoreError) -> Int {
    try await run { transaction in
      try await Self.length(of: key, complete: false, in: transaction, locking: false) ?? 0
    }
  }

  public func append(_ bytes: Data, to key: BlobKey, at offset: Int) async throws(BlobStoreError) {
    try await run { transaction in
      // The partial blob's row, made if missing, then locked: an append racing this one at the same offset
      // waits here and then finds the length moved.
      try await transaction.execute(
        "INSERT INTO blob_contents (blob_key, complete, length) VALUES (?, 0, 0) ON CONFLICT DO NOTHING",
        [.text(key.rawValue)]
      )
      let current = try await Self.length(of: key, complete: false, in: transaction, locking: true) ?? 0
      // Thrown inside the transaction: it rolls back, leaving no partial blob that was not there.
      guard current == offset else { throw BlobStoreError.offsetMismatch(expected: current, got: offset) }
      guard !bytes.isEmpty else { return }
      try await transaction.execute(
        "INSERT INTO blob_chunks (blob_key, complete, start, bytes) VALUES (?, 0, ?, ?)",
        [.text(key.rawValue), .integer(Int64(offset)), .blob(bytes)]
      )
      try await transaction.execute(
        "UPDATE blob_contents SET length = ? WHERE blob_key = ? AND complete = 0",
        [.integer(Int64(offset + bytes.count)), .text(key.rawValue)]
      )
    }
  }

  public func complete(_ key: BlobKey, at time: Timestamp) async throws(BlobStoreError) {
    try await run { transaction in
      let name = SQLValue.text(key.rawValue)
      guard try await Self.length(of: key, complete: false, in: transaction, locking: true) != nil else {
        // Completed already (a retried call whose answer was lost), or never written.
        guard try await Self.length(of: key, complete: true, in: transaction, locking: false) != nil else {
          throw BlobStoreError.gone(key)
        }
        return
      }
      try await transaction.execute("DELETE FROM blob_chunks WHERE blob_key = ? AND complete = 1", [name])
      try await transaction.execute("DELETE FROM blob_contents WHERE blob_key = ? AND complete = 1", [name])
      try await transaction.execute("UPDATE blob_chunks SET complete = 1 WHERE blob_key = ? AND complete = 0", [name])
      try await transaction.execute(
        "UPDATE blob_contents SET complete = 1, created_at = ? WHERE blob_key = ? AND complete = 0",
        [.integer(VideoTables.nanoseconds(time)), name]
      )
    }
  }

  public func size(of key: BlobKey) async throws(BlobStoreError) -> Int {
    try await run { transaction in
      guard let length = try await Self.length(of: key, complete: true, in: transaction, locking: false) else {
        throw BlobStoreError.gone(key)
      }
      return length
    }
  }

  public func read(_ key: BlobKey, offset: Int, length: Int) async throws(BlobStoreError) -> Data {
    try await run { transaction in
      guard let size = try await Self.length(of: key, complete: true, in: transaction, locking: false) else {
        throw BlobStoreError.gone(key)
      }
      let start = min(max(offset, 0), size)
      let end = min(start + max(length, 0), size)
      guard start < end else { return Data() }
      let byteLength = transaction.dialect == .postgres ? "octet_length(bytes)" : "length(bytes)"
      // The chunks that overlap [start, end), in order (the primary key's index).
      let rows = try await transaction.execute(
        """
        SELECT start, bytes FROM blob_chunks WHERE blob_key = ? AND complete = 1 AND start < ?
          AND start + \(byteLength) > ? ORDER BY start
        """,
        [.text(key.rawValue), .integer(Int64(end)), .integer(Int64(start))]
      )
      var result = Data(capacity: end - start)
      for row in rows {
        guard let chunkStart = row["start"]?.integer.map(Int.init), let bytes = row["bytes"]?.blob else { continue }
        let from = max(start, chunkStart) - chunkStart
        let to = min(end, chunkStart + bytes.count) - chunkStart
        guard from < to else { continue }
        result.append(bytes[(bytes.startIndex + from)..<(bytes.startIndex + to)])
      }
      guard result.count == end - start else {
        throw BlobStoreError.unavailable("blob \(key) has \(result.count) of \(end - start) bytes in its chunks")
      }
      return result
    }
  }

  public func delete(_ key: BlobKey) async throws(BlobStoreError) {
    try await run { transaction in
      try await transaction.execute("DELETE FROM blob_chunks WHERE blob_key = ?", [.text(key.rawValue)])
      try await transaction.execute("DELETE FROM blob_contents WHERE blob_key = ?", [.text(key.rawValue)])
    }
  }

  public func list() async throws(BlobStoreError) -> [BlobInfo] {
    try await run { transaction in
      let rows = try await transaction.execute(
        "SELECT blob_key, length, created_at FROM blob_contents WHERE complete = 1"
      )
      // Sorted here, not by the database: PostgreSQL orders text by its collation, Swift by code points.
      return rows.compactMap { row -> BlobInfo? in
        guard let key = row["blob_key"]?.text, let length = row["length"]?.integer else { return nil }
        let created = row["created_at"]?.integer.map { VideoTables.timestamp(nanoseconds: $0) }
        return BlobInfo(
          key: BlobKey(rawValue: key),
          size: Int(length),
          createdAt: created ?? Timestamp(Date(timeIntervalSince1970: 0))
        )
      }.sorted { $0.key.rawValue < $1.key.rawValue }
    }
  }

  /// The length of `key`'s partial or complete blob, or `nil` when there is none; the row locked until the
  /// transaction ends when `locking` (on PostgreSQL: SQLite's write transactions run one at a time).
  private static func length(
    of key: BlobKey,
    complete: Bool,
    in transaction: any DatabaseTransaction,
    locking: Bool
  ) async throws -> Int? {
    let lock = locking && transaction.dialect == .postgres ? " FOR UPDATE" : ""
    return try await transaction.execute(
      "SELECT length FROM blob_contents WHERE blob_key = ? AND complete = ?\(lock)",
      [.text(key.rawValue), .integer(complete ? 1 : 0)]
    ).first?["length"]?.integer.map(Int.init)
  }

  /// Runs `body` in one transaction of the log: a ``BlobStoreError`` it throws comes back as it is; any
  /// other failure (the database refused or did not answer) is ``BlobStoreError/unavailable(_:)``.
  private func run<Result: Sendable>(
    _ body: @escaping @Sendable (any LogTransaction) async throws -> Result
  ) async throws(BlobStoreError) -> Result {
    do {
      return try await log.transaction(body)
    } catch let error as BlobStoreError {
      throw error
    } catch {
      throw .unavailable("blob storage: \(error)")
    }
  }
}
