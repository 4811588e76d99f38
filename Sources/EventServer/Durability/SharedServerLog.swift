import Foundation

/// An input log that several ``EventServer`` nodes share: the storage interface of a cluster.
///
/// Every node applies every record, in position order, to its own copy of the state machine, so every node
/// holds the same application state and the same queues, and any node answers any request for any queue.
/// A node decides only in a **turn**: holding the log's append lock, it first applies every record other
/// nodes committed, then decides what waited (registrations, mutations, polls, heartbeats, sweeps) on
/// state that is current, and the turn appends what it decided and commits. Nodes therefore never decide
/// on stale state, and the log's order is the order every node applies. Between turns a node follows the
/// log: it reads what others committed, woken by ``waitForAppends(after:)`` or by its own slow timer.
///
/// The `Server/` package implements it on PostgreSQL (the append lock is the row lock of a one-row counter,
/// held until commit, so positions commit in order); ``InMemorySharedLog`` implements it for tests and the
/// simulation.
///
/// ```swift
/// let log = InMemorySharedLog()
/// let (nodeA, _) = try await EventServer.joining(log, application: NoteBoard(), clock: clock)
/// let (nodeB, _) = try await EventServer.joining(log, application: NoteBoard(), clock: clock)
/// ```
public protocol SharedServerLog: ServerLog {
  /// This log as the kind of shared log it is: records only, transactional, or one partition of several.
  /// Provided by the protocols' extensions (the most refined one a log conforms to); a log does not write
  /// its own.
  var clusterLog: ClusterLog { get }

  /// Up to `limit` records committed after `position`, in order: a gap-free run starting at
  /// `position + 1`, or nothing. A run that starts later means the records were dropped behind a snapshot;
  /// the node then rebuilds from ``ServerLog/load()``.
  /// - Throws: ``ServerLogError/storage(_:)`` when the log cannot be read.
  func records(after position: UInt64, limit: Int) async throws(ServerLogError) -> [StoredRecord]

  /// One turn: takes the log's append lock (waiting for another node's turn to end), hands `decide` every
  /// record committed after `position`, then appends the records `decide` returns and commits, releasing
  /// the lock. The returned records must continue the log: the first at the position after the last one
  /// handed over (or after `position` when none was).
  ///
  /// When the call throws, `decide` either was not called, or what it returned may or may not be committed
  /// (a commit whose answer was lost): the caller treats its own state as ahead of the log.
  /// - Throws: ``ServerLogError`` when the lock, the read or the commit failed or ran out of time, or what
  ///   `decide` threw.
  func appendTurn(
    after position: UInt64,
    _ decide: @escaping @Sendable ([StoredRecord]) async throws(ServerLogError) -> [StoredRecord]
  ) async throws(ServerLogError)

  /// Suspends until another node may have appended after `position` (a hint: it may return early or never;
  /// a node also reads the log on a slow timer). Returns at once when the calling task is cancelled.
  func waitForAppends(after position: UInt64) async

  /// Claims a place for a node among the cluster's nodes, held until the log is closed or the node's process
  /// ends; refused while one server (not a node) holds the storage.
  /// - Returns: Whether no other node held a place: this node starts the cluster again, and cannot prove
  ///   that the log did not go back while every node was down (a restored dump), so it records a recovery
  ///   in its first turn (every queue's event ids skip a random distance).
  /// - Throws: ``ServerLogError/inUse(_:)`` when one server holds the storage.
  func claimPlaceInCluster() async throws(ServerLogError) -> Bool

  /// The newest position this log has heard committed (by any node), without asking the database: what a
  /// node compares its own position with to report its replication lag. 0 when unknown.
  var announcedPosition: UInt64 { get }
}

extension SharedServerLog {
  /// Unknown: a log that cannot tell reports no lag.
  public var announcedPosition: UInt64 { 0 }
}

/// How a cluster node follows and uses its ``SharedServerLog``.
public struct ReplicationSettings: Sendable, Hashable {
  /// How often a node reads the log without a hint (notifications can be lost while disconnected).
  public var followInterval: Duration
  /// How many records one read takes at most.
  public var readLimit: Int
  /// After a turn that failed before deciding anything (the database unreachable), requests fail at once
  /// for this long instead of each waiting for the database.
  public var retryAfterFailure: Duration
  /// When a node writes a snapshot by itself (each node writes its own).
  public var snapshots: SnapshotSchedule

  /// Settings with the defaults: read at least every second, 1,000 records a read, 1 s of failing fast,
  /// snapshots ``SnapshotSchedule/byWork``.
  public init(
    followInterval: Duration = .seconds(1),
    readLimit: Int = 1_000,
    retryAfterFailure: Duration = .seconds(1),
    snapshots: SnapshotSchedule = .byWork
  ) {
    self.followInterval = followInterval
    self.readLimit = max(readLimit, 1)
    self.retryAfterFailure = retryAfterFailure
    self.snapshots = snapshots
  }
}
