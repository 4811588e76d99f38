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
    var records: [StoredRecord] = []
    var failure: ServerLogError?
  }

  private let contents = Mutex(Contents())

  /// An empty log.
  public init() {}

  /// A log holding `stored` (as a test arranges it).
  public init(_ stored: StoredLog) {
    contents.withLock {
      $0.snapshot = stored.snapshot
      $0.records = stored.records
    }
  }

  /// What the log holds now.
  public var stored: StoredLog {
    contents.withLock { StoredLog(snapshot: $0.snapshot, records: $0.records) }
  }

  /// Makes every later call fail with `error` (`nil`: work again), to test how a server meets a failing disk.
  public func failEveryCall(with error: ServerLogError?) {
    contents.withLock { $0.failure = error }
  }

  public func load() throws(ServerLogError) -> StoredLog {
    try contents.withLock { (contents) throws(ServerLogError) -> StoredLog in
      if let failure = contents.failure { throw failure }
      return StoredLog(snapshot: contents.snapshot, records: contents.records)
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
      contents.snapshot = snapshot
      contents.records.removeAll { $0.position <= snapshot.position }
    }
  }

  public func truncate(after position: UInt64) throws(ServerLogError) {
    try contents.withLock { (contents) throws(ServerLogError) in
      if let failure = contents.failure { throw failure }
      contents.records.removeAll { $0.position > position }
    }
  }
}
