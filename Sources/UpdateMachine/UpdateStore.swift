import Foundation

/// Where an update machine keeps its persisted record: bytes in, bytes out, written atomically.
///
/// ``FileStore`` writes a file (temp file, fsync, rename); ``InMemoryStore`` keeps the bytes in memory for
/// tests and previews. A store never deletes what it cannot read: ``setAside(reason:)`` moves it away.
public protocol UpdateStore: Sendable {
  /// The stored bytes, or `nil` when nothing is stored.
  /// - Throws: ``PersistenceError`` when the store cannot be read.
  func load() throws(PersistenceError) -> Data?
  /// Replaces the stored bytes in one atomic step: after a crash, either the old or the new bytes are there.
  /// - Throws: ``PersistenceError`` when the write fails; the old bytes are then intact.
  func save(_ data: Data) throws(PersistenceError)
  /// Moves the stored bytes aside, keeping them, so a fresh record can be written.
  /// - Returns: Where they went, for the report.
  func setAside(reason: String) throws(PersistenceError) -> String

  /// Takes the store for one machine, before the first ``load()``: a store another process (or another
  /// machine in this process) holds throws ``PersistenceError/inUse(_:)``, and the machine stops with
  /// ``StopReason/storeInUse(_:)`` instead of reading or writing. By default, nothing to take.
  func open() throws(PersistenceError)

  /// Gives the store back (the machine stopped). By default, nothing to give.
  func close()
}

/// Why persisted data could not be used or written.
public struct PersistenceError: Error, Hashable, Sendable, CustomStringConvertible {
  private enum Code: Hashable {
    case inUse
    case unreadable
    case corrupt
    case newerVersion
    case writeFailed
  }

  private let code: Code
  /// What happened, and where the bytes were set aside if they were.
  public let detail: String

  private init(_ code: Code, _ detail: String) {
    self.code = code
    self.detail = detail
  }

  /// The store could not be read.
  public static func unreadable(_ detail: String) -> PersistenceError { .init(.unreadable, detail) }
  /// The store is open in another process (or another machine in this one): nothing was read.
  public static func inUse(_ detail: String) -> PersistenceError { .init(.inUse, detail) }
  /// The bytes are not a record this build understands.
  public static func corrupt(_ detail: String) -> PersistenceError { .init(.corrupt, detail) }
  /// The record was written by a newer format version.
  public static func newerVersion(found: Int, supported: Int) -> PersistenceError {
    .init(.newerVersion, "persisted format version \(found) is newer than this build's \(supported)")
  }
  /// Writing failed.
  public static func writeFailed(_ detail: String) -> PersistenceError { .init(.writeFailed, detail) }

  /// Whether two errors are of the same kind, whatever their detail.
  public func isSameKind(as other: PersistenceError) -> Bool { code == other.code }

  /// The same error with a note appended to its detail.
  func noting(_ note: String) -> PersistenceError { .init(code, "\(detail); \(note)") }

  public var description: String { detail }
}

extension UpdateStore {
  public func open() throws(PersistenceError) {}

  public func close() {}
}
