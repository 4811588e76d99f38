import Foundation

/// One partition of a partitioned log, as a node serving a ``StoredApplication`` on that partition uses it:
/// the partition's own log (a ``TransactionalSharedLog``) and its **inbox**, where commands decided on other
/// partitions leave the deliveries for this partition's users.
///
/// A command's deliveries to users of other partitions are written into those partitions' inboxes in the
/// command's own transaction (``PartitionedLogTransaction/send(_:to:)``), without taking their counter rows:
/// no turn ever waits for another partition's, so there is no deadlock, and the command, its events and its
/// exactly-once memory still commit together. The partition's holder takes its inbox in its next turn
/// (``PartitionedLogTransaction/takeInbox()``), delivering each message to its queues as a record of its own
/// log, in the same transaction: each message is delivered once.
///
/// The `Server/` package implements it on PostgreSQL (`PostgresServerLog.partition(_:)`).
public protocol PartitionedSharedLog: TransactionalSharedLog {
  /// How many partitions the log has, and which users are in which.
  var partitions: PartitionMap { get }
  /// The partition this log is, in `0..<partitions.count`.
  var partitionIndex: Int { get }
  /// Whether messages wait in this partition's inbox (read outside a turn: a hint to start one).
  /// - Throws: ``ServerLogError/storage(_:)`` when the database cannot answer.
  func hasInbox() async throws(ServerLogError) -> Bool
  /// Suspends until another partition may have sent this one a message (a hint: it may return early or
  /// never; a node also looks on its slow timer), or the task is cancelled.
  func waitForInbox() async
}

/// The transaction of a turn on a ``PartitionedSharedLog``.
public protocol PartitionedLogTransaction: LogTransaction {
  /// Leaves `message` in partition `partition`'s inbox; it is there once this transaction commits.
  /// - Throws: ``ServerLogError/storage(_:)`` when the write fails.
  func send(_ message: Data, to partition: Int) async throws(ServerLogError)
  /// Takes every message waiting in this partition's inbox, in the order they were sent (by one sender,
  /// always; across senders, any): they are gone once this transaction commits, and back if it rolls back.
  /// - Throws: ``ServerLogError/storage(_:)`` when the read fails.
  func takeInbox() async throws(ServerLogError) -> [Data]
}
