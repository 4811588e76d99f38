import Foundation

/// Where a durable ``EventServer`` keeps its input log and snapshots: the narrow storage interface.
///
/// Records are opaque framed bytes (``ServerLogCodec``) at contiguous positions starting at 1; a snapshot
/// covers every position up to its own. An implementation only stores and returns bytes: the server decides
/// what they mean, checks their checksums and replays them. This package ships ``InMemoryServerLog`` (tests,
/// the simulation); the `Server/` package ships one on SQLite (the default of `event-server`), and one on
/// PostgreSQL fits the same calls.
///
/// ```swift
/// let log = InMemoryServerLog()
/// try await log.append([StoredRecord(position: 1, bytes: frame)])   // durable when it returns
/// let stored = try await log.load()
/// ```
public protocol ServerLog: Sendable {
  /// Reads what a restart needs: the newest complete snapshot and every record after it, in position order.
  /// Records at or before the snapshot's position may be returned too; they are skipped.
  /// - Throws: ``ServerLogError/storage(_:)`` when the storage cannot be read.
  func load() async throws(ServerLogError) -> StoredLog

  /// Appends records, in order, after the last one. When it returns, they survive a crash of the process
  /// and (as far as the storage promises) of the machine.
  /// - Throws: ``ServerLogError`` when they could not be made durable; the server then stops accepting writes.
  func append(_ records: [StoredRecord]) async throws(ServerLogError)

  /// Stores a snapshot durably, then may drop the records at or before its position.
  /// - Throws: ``ServerLogError`` when it could not be stored; the previous snapshot and the log still hold.
  func saveSnapshot(_ snapshot: StoredSnapshot) async throws(ServerLogError)

  /// Drops every record after `position` (a torn or damaged tail found at start, whose requests were never
  /// answered), so that the next append continues at `position + 1`.
  func truncate(after position: UInt64) async throws(ServerLogError)

  /// Claims the storage for one server until the log is closed or the process ends: refused while another
  /// server, or a node of a cluster, holds it. ``EventServer`` calls it before it loads anything.
  ///
  /// A log whose storage can be opened by one process only (the SQLite log locks its file when it opens)
  /// need not do anything; the default does nothing.
  /// - Throws: ``ServerLogError/inUse(_:)`` when another server holds the storage.
  func claimForOneServer() async throws(ServerLogError)
}

extension ServerLog {
  /// Does nothing: the storage is claimed when it is opened, or cannot be shared.
  public func claimForOneServer() async throws(ServerLogError) {}
}

/// One framed record at its log position.
public struct StoredRecord: Sendable, Hashable {
  /// Its position: 1 for the first record ever, then one more for each.
  public var position: UInt64
  /// Its bytes, as ``ServerLogCodec`` framed them (version, length, checksum, payload).
  public var bytes: Data

  /// Creates a record from its parts.
  public init(position: UInt64, bytes: Data) {
    self.position = position
    self.bytes = bytes
  }
}

/// A snapshot's bytes and the last position it includes.
public struct StoredSnapshot: Sendable, Hashable {
  /// The last log position the snapshot includes.
  public var position: UInt64
  /// Its bytes (a ``ServerSnapshot`` encoded).
  public var bytes: Data

  /// Creates a snapshot from its parts.
  public init(position: UInt64, bytes: Data) {
    self.position = position
    self.bytes = bytes
  }
}

/// What storage returns to a restarting server.
public struct StoredLog: Sendable, Hashable {
  /// The newest complete snapshot, if any was stored.
  public var snapshot: StoredSnapshot?
  /// The records, in position order: every record after ``previousSnapshot`` when one is given (so a
  /// damaged ``snapshot`` can be replaced by it and them), else every record after ``snapshot``.
  public var records: [StoredRecord]
  /// The snapshot before ``snapshot``, when the storage keeps it with the records after it: what a restart
  /// falls back to when the newest snapshot fails its checksum.
  public var previousSnapshot: StoredSnapshot?
  /// Whether the storage can tear its last record (a file cut by a crash mid-write). A database writes a row
  /// whole or not at all: a last record failing its checksum there is damage, refused, not a cut write
  /// silently dropped.
  public var lastRecordCanTear: Bool

  /// Creates a stored log from its parts.
  public init(
    snapshot: StoredSnapshot?,
    records: [StoredRecord],
    previousSnapshot: StoredSnapshot? = nil,
    lastRecordCanTear: Bool = false
  ) {
    self.snapshot = snapshot
    self.records = records
    self.previousSnapshot = previousSnapshot
    self.lastRecordCanTear = lastRecordCanTear
  }
}

/// Why the input log could not be read, written or used. Nothing stored is deleted because of it.
public struct ServerLogError: Error, Hashable, Sendable, CustomStringConvertible {
  private enum Code: Hashable {
    case storage
    case newerFormat
    case damaged
    case gap
    case undecodable
    case inUse
    case partitionCount
  }

  private let code: Code
  /// What went wrong, for logs.
  public let detail: String

  private init(_ code: Code, _ detail: String) {
    self.code = code
    self.detail = detail
  }

  /// The storage failed (a disk error, a database that cannot be reached).
  public static func storage(_ detail: String) -> ServerLogError { .init(.storage, "log storage: \(detail)") }
  /// A record or snapshot was written by a newer build; this build does not read it and changes nothing.
  public static func newerFormat(found: Int, supported: Int) -> ServerLogError {
    .init(.newerFormat, "the log was written in format \(found); this build reads up to \(supported): upgrade it")
  }
  /// A record before the last one fails its checksum: the log was damaged, not torn by a crash.
  public static func damaged(position: UInt64) -> ServerLogError {
    .init(.damaged, "log record \(position) is damaged (checksum) and records follow it")
  }
  /// The last record fails its checksum in a store whose records cannot be torn (a database row is written
  /// whole or not at all): that is damage, not a write cut by a crash, and it may hold an acknowledged write.
  public static func damagedLastRecord(position: UInt64) -> ServerLogError {
    .init(
      .damaged,
      "log record \(position), the last, is damaged (checksum); this store cannot tear a record, so it is not a cut "
        + "write and may hold an acknowledged one: restore the data from a backup (docs/reliability.md, \"Backups\")"
    )
  }
  /// Another server holds the storage (the same database file, or the same PostgreSQL database as a single
  /// server): two servers on one store would overwrite each other's state, so the second is refused.
  public static func inUse(_ detail: String) -> ServerLogError { .init(.inUse, "storage in use: \(detail)") }
  /// The log was created with another number of partitions than this server was started with (or a
  /// partition beyond its count was asked for): the count is fixed when the log is created, since moving a
  /// user to another partition would move their queues.
  public static func partitionCount(found: Int, asked: Int) -> ServerLogError {
    .init(
      .partitionCount,
      "the log has \(found) partition\(found == 1 ? "" : "s"), fixed when it was created; this server asked for "
        + "\(asked): start it with \(found) (docs/scaling.md, \"Partitions\")"
    )
  }
  /// The newest snapshot fails its checksum, and no earlier snapshot with the log after it can replace it.
  public static func damagedSnapshot(position: UInt64) -> ServerLogError {
    .init(
      .damaged,
      "the snapshot at position \(position) is damaged (checksum) and no earlier snapshot with the records after it "
        + "is stored: restore the data from a backup (docs/reliability.md, \"Backups\")"
    )
  }
  /// The records do not follow the snapshot without a gap.
  public static func gap(after position: UInt64, next: UInt64) -> ServerLogError {
    .init(.gap, "the log jumps from position \(position) to \(next): records are missing")
  }
  /// Bytes with a good checksum that are not a valid record or snapshot.
  public static func undecodable(_ detail: String) -> ServerLogError { .init(.undecodable, "undecodable: \(detail)") }

  /// Whether two errors are of the same kind, whatever their detail.
  public func isSameKind(as other: ServerLogError) -> Bool { code == other.code }

  public var description: String { detail }
}
