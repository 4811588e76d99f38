import Foundation
import Synchronization

/// A ``ServerLog`` in memory: for tests, the simulation and servers that need no durability across a
/// process. "Durable" means held by this object, which outlives the ``EventServer`` a test crashes.
///
/// ```swift
/// let log = InMemoryServerLog()
/// let server = try await EventServer.recovering(from: log, application: app)
/// ```
public final class InMemoryServerLog: ServerLog {
  private struct Contents {
    var snapshot: StoredSnapshot?
    var previousSnapshot: StoredSnapshot?
    var records: [StoredRecord] = []
    var lastRecordCanTear = false
    var failure: ServerLogError?

    var stored: StoredLog {
      StoredLog(
        snapshot: snapshot,
        records: records,
        previousSnapshot: previousSnapshot,
        lastRecordCanTear: lastRecordCanTear
      )
    }
  }

  private let contents = Mutex(Contents())

  /// An empty log.
  public init() {}

  /// A log holding `stored` (as a test arranges it).
  public init(_ stored: StoredLog) {
    contents.withLock {
      $0.snapshot = stored.snapshot
      $0.previousSnapshot = stored.previousSnapshot
      $0.records = stored.records
      $0.lastRecordCanTear = stored.lastRecordCanTear
    }
  }

  /// What the log holds now.
  public var stored: StoredLog {
    contents.withLock { $0.stored }
  }

  /// Makes every later call fail with `error` (`nil`: work again), to test how a server meets a failing disk.
  public func failEveryCall(with error: ServerLogError?) {
    contents.withLock { $0.failure = error }
  }

  public func load() throws(ServerLogError) -> StoredLog {
    try contents.withLock { (contents) throws(ServerLogError) -> StoredLog in
      if let failure = contents.failure { throw failure }
      return contents.stored
    }
  }

  public func append(_ records: [StoredRecord]) throws(ServerLogError) {
    try contents.withLock { (contents) throws(ServerLogError) in
      if let failure = contents.failure { throw failure }
      let last = contents.records.last?.position ?? contents.snapshot?.position ?? 0
      if let first = records.first, first.position != last + 1 {
        throw .gap(after: last, next: first.position)
      }
      contents.records.append(contentsOf: records)
    }
  }

  public func saveSnapshot(_ snapshot: StoredSnapshot) throws(ServerLogError) {
    try contents.withLock { (contents) throws(ServerLogError) in
      if let failure = contents.failure { throw failure }
      // As the SQLite log: the newest becomes the previous one, kept with the records after it.
      contents.previousSnapshot = contents.snapshot
      contents.snapshot = snapshot
      let kept = contents.previousSnapshot?.position ?? snapshot.position
      contents.records.removeAll { $0.position <= kept }
    }
  }

  public func truncate(after position: UInt64) throws(ServerLogError) {
    try contents.withLock { (contents) throws(ServerLogError) in
      if let failure = contents.failure { throw failure }
      contents.records.removeAll { $0.position > position }
    }
  }
}
