import Foundation
import Synchronization

/// A ``SharedServerLog`` in memory: several ``EventServer`` nodes of one test or simulation share it.
/// "Committed" means held by this object, which outlives the nodes a test kills.
///
/// Turns take an in-memory lock, one after another in the order they asked. Faults are injected with
/// ``failEveryCall(with:)`` (nothing is read or written), ``loseNextCommitAnswer()`` (the records are
/// committed, but the node hears of a failure) and ``failNextCommit()`` (the node decided, nothing is
/// committed).
///
/// ```swift
/// let log = InMemorySharedLog()
/// let (node, _) = try await EventServer.joining(log, application: NoteBoard(), clock: ContinuousClock())
/// ```
public final class InMemorySharedLog: SharedServerLog {
  private struct Contents {
    var snapshot: StoredSnapshot?
    var records: [StoredRecord] = []
    var failure: ServerLogError?
    var loseCommitAnswer = false
    var failCommit = false
    var turnHeld = false
    var turnWaiters: [CheckedContinuation<Void, Never>] = []
    var appendWaiters: [(id: Int, after: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
    var nextWaiterID = 0
    var turns = 0
    /// Whether a node ever claimed a place (nodes of an in-memory log never leave: they die with the test).
    var hasNodes = false

    var lastPosition: UInt64 { records.last?.position ?? snapshot?.position ?? 0 }
  }

  private let contents = Mutex(Contents())

  /// An empty log.
  public init() {}

  /// A log holding `stored`, with no node: as a database restored from a dump, before any node starts.
  public init(_ stored: StoredLog) {
    contents.withLock {
      $0.snapshot = stored.snapshot
      $0.records = stored.records
    }
  }

  /// Claims a place for a node: the first claim on this log starts the cluster (see
  /// ``SharedServerLog/claimPlaceInCluster()``).
  public func claimPlaceInCluster() throws(ServerLogError) -> Bool {
    try contents.withLock { (contents) throws(ServerLogError) -> Bool in
      if let failure = contents.failure { throw failure }
      defer { contents.hasNodes = true }
      return !contents.hasNodes
    }
  }

  /// What the log holds now.
  public var stored: StoredLog {
    contents.withLock { StoredLog(snapshot: $0.snapshot, records: $0.records) }
  }

  /// How many turns committed (or failed) so far.
  public var turnCount: Int { contents.withLock { $0.turns } }

  /// Makes every later call fail with `error` before reading or writing anything (`nil`: work again), as a
  /// database that cannot be reached.
  public func failEveryCall(with error: ServerLogError?) {
    contents.withLock { $0.failure = error }
  }

  /// The next turn commits its records but throws, as a commit whose answer was lost.
  public func loseNextCommitAnswer() {
    contents.withLock { $0.loseCommitAnswer = true }
  }

  /// The next turn lets its node decide, then commits nothing and throws, as a database that failed or
  /// ran out of time before the commit.
  public func failNextCommit() {
    contents.withLock { $0.failCommit = true }
  }

  /// The newest position committed.
  public var announcedPosition: UInt64 { contents.withLock { $0.lastPosition } }

  public func load() throws(ServerLogError) -> StoredLog {
    try contents.withLock { (contents) throws(ServerLogError) -> StoredLog in
      if let failure = contents.failure { throw failure }
      let after = contents.snapshot?.position ?? 0
      return StoredLog(snapshot: contents.snapshot, records: contents.records.filter { $0.position > after })
    }
  }

  /// Appends outside a turn, fenced like one: the records must continue the log.
  public func append(_ records: [StoredRecord]) throws(ServerLogError) {
    try commit(records)
  }

  /// Keeps the newest snapshot (an older one, from a node behind, is ignored); records stay, so a node that
  /// is behind still reads them.
  public func saveSnapshot(_ snapshot: StoredSnapshot) throws(ServerLogError) {
    try contents.withLock { (contents) throws(ServerLogError) in
      if let failure = contents.failure { throw failure }
      if (contents.snapshot?.position ?? 0) < snapshot.position { contents.snapshot = snapshot }
    }
  }

  /// Refused: a shared log is never torn (a turn commits whole or not at all).
  public func truncate(after position: UInt64) throws(ServerLogError) {
    throw .storage("a shared log is not truncated")
  }

  public func records(after position: UInt64, limit: Int) throws(ServerLogError) -> [StoredRecord] {
    try contents.withLock { (contents) throws(ServerLogError) -> [StoredRecord] in
      if let failure = contents.failure { throw failure }
      return Array(contents.records.lazy.filter { $0.position > position }.prefix(limit))
    }
  }

  public func appendTurn(
    after position: UInt64,
    _ decide: @escaping @Sendable ([StoredRecord]) async throws(ServerLogError) -> [StoredRecord]
  ) async throws(ServerLogError) {
    await takeTurnLock()
    defer { releaseTurnLock() }
    let committed = try records(after: position, limit: .max)
    let decided = try await decide(committed)
    let fails = contents.withLock { contents in
      defer { contents.failCommit = false }
      return contents.failCommit
    }
    if fails { throw .storage("the commit failed") }
    try commit(decided)
    let lost = contents.withLock { contents in
      contents.turns += 1
      defer { contents.loseCommitAnswer = false }
      return contents.loseCommitAnswer
    }
    if lost { throw .storage("the commit's answer was lost") }
  }

  public func waitForAppends(after position: UInt64) async {
    let id = contents.withLock { contents in
      defer { contents.nextWaiterID += 1 }
      return contents.nextWaiterID
    }
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        let resumeNow = contents.withLock { contents in
          if contents.lastPosition > position || Task.isCancelled { return true }
          contents.appendWaiters.append((id, position, continuation))
          return false
        }
        if resumeNow { continuation.resume() }
      }
    } onCancel: {
      let waiter = contents.withLock { contents in
        contents.appendWaiters.firstIndex { $0.id == id }.map { contents.appendWaiters.remove(at: $0) }
      }
      waiter?.continuation.resume()
    }
  }

  // MARK: - Helpers

  private func commit(_ records: [StoredRecord]) throws(ServerLogError) {
    let woken = try contents.withLock { (contents) throws(ServerLogError) -> [CheckedContinuation<Void, Never>] in
      if let failure = contents.failure { throw failure }
      guard let first = records.first else { return [] }
      for (offset, record) in records.enumerated() where record.position != contents.lastPosition + 1 + UInt64(offset) {
        throw .gap(after: contents.lastPosition, next: first.position)
      }
      contents.records.append(contentsOf: records)
      let last = contents.lastPosition
      var woken: [CheckedContinuation<Void, Never>] = []
      contents.appendWaiters.removeAll { waiter in
        guard waiter.after < last else { return false }
        woken.append(waiter.continuation)
        return true
      }
      return woken
    }
    for continuation in woken { continuation.resume() }
  }

  private func takeTurnLock() async {
    await withCheckedContinuation { continuation in
      let granted = contents.withLock { contents in
        if contents.turnHeld {
          contents.turnWaiters.append(continuation)
          return false
        }
        contents.turnHeld = true
        return true
      }
      if granted { continuation.resume() }
    }
  }

  private func releaseTurnLock() {
    // The lock passes straight to the next waiter, in the order they asked.
    let next = contents.withLock { contents -> CheckedContinuation<Void, Never>? in
      if contents.turnWaiters.isEmpty {
        contents.turnHeld = false
        return nil
      }
      return contents.turnWaiters.removeFirst()
    }
    next?.resume()
  }
}
