import EventServer
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// A partition's inbox (``PartitionedSharedLog``): the `event_inbox` table, one row per message, and the
/// channel `event_inbox_p`*p* each message notifies.
extension PostgresServerLog: PartitionedSharedLog {
  /// Whether messages wait in this partition's inbox.
  public func hasInbox() async throws(ServerLogError) -> Bool {
    let partition = Int32(tables.partition)
    return try await withDeadline {
      let rows = try await self.client.query(
        "SELECT EXISTS (SELECT 1 FROM event_inbox WHERE partition = \(partition))",
        logger: self.logger
      )
      var waiting = false
      for try await value in rows.decode(Bool.self) { waiting = value }
      return waiting
    }
  }

  /// Returns once a message to this partition was announced after the call began, the listening connection
  /// (re)started, or the task is cancelled. The first call starts listening on a connection of its own.
  public func waitForInbox() async {
    inboxHints.startIfNeeded { [weak self] sink throws(ServerLogError) in
      guard let self else { return }
      try await self.listen(on: self.tables.inboxChannel, onListening: sink.listening) { _ in
        await sink.announced(self.inboxHints.latest + 1)
      }
    }
    await inboxHints.wait(after: inboxHints.latest)
  }

  /// The channel on which nodes announce that they let leases go or joined.
  static var leaseChannel: String { "partition_leases" }

  /// Tells every node's ``waitForLeaseChange()`` that leases were let go or a node joined, so that the
  /// others look at the leases now rather than at their next interval. A hint only: lost, it costs a look's
  /// interval; it fails silently.
  public func announceLeaseChange() async {
    let logger = logger
    _ = try? await withDeadline { [client] in
      try await client.query("SELECT pg_notify(\(Self.leaseChannel), '')", logger: logger)
    }
  }

  /// How many lease changes this log has heard announced (0 before it listens).
  public var leaseChangesHeard: UInt64 { leaseHints.latest }

  /// Returns once more than `heard` lease changes were announced (``announceLeaseChange()``, by any node; read
  /// `heard` from ``leaseChangesHeard`` before the work that may miss one), the listening connection
  /// (re)started, or the task is cancelled. The first call starts listening on a connection of its own.
  public func waitForLeaseChange(after heard: UInt64) async {
    startListeningForLeaseChanges()
    await leaseHints.wait(after: heard)
  }

  /// Starts listening for lease changes, if not yet: a node does so before it announces that it joined, so
  /// that the others' answers (the partitions they let go) are not sent before anyone listens.
  public func startListeningForLeaseChanges() {
    leaseHints.startIfNeeded { [weak self] sink throws(ServerLogError) in
      guard let self else { return }
      try await self.listen(on: Self.leaseChannel, onListening: sink.listening) { _ in
        await sink.announced(self.leaseHints.latest + 1)
      }
    }
  }

  /// Starts listening for lease changes if not yet, and returns once the `LISTEN` is in effect, the log is
  /// closed, the task is cancelled, or `bound` has passed (the database unreachable: the node's own looks
  /// then find what it did not hear). A node calls this before it announces a change the others answer
  /// (that it joined), so that their answers, the partitions they let go, are heard at once.
  public func listeningForLeaseChanges(within bound: Duration) async {
    startListeningForLeaseChanges()
    let hints = leaseHints
    await withTaskGroup(of: Void.self) { group in
      group.addTask { await hints.untilListening() }
      group.addTask { try? await Task.sleep(for: bound) }
      await group.next()
      group.cancelAll()
    }
  }
}

extension PostgresLogTransaction: PartitionedLogTransaction {
  func send(_ message: Data, to partition: Int) async throws(ServerLogError) {
    guard (0..<log.partitions.count).contains(partition) else {
      throw .partitionCount(found: log.partitions.count, asked: partition + 1)
    }
    let bytes = ByteBuffer(bytes: message)
    let channel = LogTables(partition: partition).inboxChannel
    do {
      try await connection.query(
        "INSERT INTO event_inbox (partition, message) VALUES (\(Int32(partition)), \(bytes))",
        logger: log.logger
      )
      try await connection.query("SELECT pg_notify(\(channel), '')", logger: log.logger)
    } catch {
      throw .storage("\(log.location): a message to partition \(partition): \(String(reflecting: error))")
    }
  }

  func takeInbox() async throws(ServerLogError) -> [Data] {
    let partition = Int32(log.tables.partition)
    do {
      let rows = try await connection.query(
        "DELETE FROM event_inbox WHERE partition = \(partition) RETURNING id, message",
        logger: log.logger
      )
      var messages: [(id: Int64, bytes: Data)] = []
      for try await (id, message) in rows.decode((Int64, ByteBuffer).self) {
        messages.append((id, Data(message.readableBytesView)))
      }
      return messages.sorted { $0.id < $1.id }.map(\.bytes)
    } catch {
      throw .storage("\(log.location): the inbox: \(String(reflecting: error))")
    }
  }
}
