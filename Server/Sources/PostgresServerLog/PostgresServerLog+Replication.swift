import EventServer
import Foundation
import Logging
import NIOCore
import PostgresNIO

/// What cluster nodes share (``SharedServerLog``): turns under the counter row, appends that take the next
/// positions, reading what others committed, and the notifications that announce it.
extension PostgresServerLog {
  /// One turn of a cluster node (``SharedServerLog``): in one transaction, locks the `event_log_meta` row
  /// (the append lock: another node's turn waits here), reads every record after `position`, lets the node
  /// decide, inserts what it decided after the last position and commits, notifying the channel. The whole
  /// turn must end within ``operationTimeout``.
  public func appendTurn(
    after position: UInt64,
    _ decide: @escaping @Sendable ([StoredRecord]) async throws(ServerLogError) -> [StoredRecord]
  ) async throws(ServerLogError) {
    try await appendTurn(after: position, isolation: .eachStatement) { (committed, _) throws(ServerLogError) in
      try await decide(committed)
    }
  }

  /// One turn, as ``appendTurn(after:_:)``, whose `decide` also gets the turn's transaction: a stored
  /// application's statements run in it, and commit with the turn's records.
  public func appendTurn(
    after position: UInt64,
    isolation: TurnIsolation,
    inTransaction decide:
      @escaping @Sendable ([StoredRecord], any LogTransaction) async throws(ServerLogError) ->
      [StoredRecord]
  ) async throws(ServerLogError) {
    try await transaction { connection in
      // With one partition the append lock already excludes every other writer (and a snapshot taken
      // before waiting for it would miss what the previous holder appended): only partitions need one.
      if isolation == .oneSnapshot, self.partitions.count > 1 {
        try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", logger: self.logger)
      }
      let locked = try await connection.query(
        "SELECT last_position FROM \(unescaped: self.tables.meta) WHERE id = 1 FOR UPDATE",
        logger: self.logger
      )
      var last: Int64 = 0
      for try await value in locked.decode(Int64.self) { last = value }
      var committed: [StoredRecord] = []
      if UInt64(max(last, 0)) > position {
        let rows = try await connection.query(
          "SELECT position, record FROM \(unescaped: self.tables.records) WHERE position > \(Int64(position)) ORDER BY position",
          logger: self.logger
        )
        for try await (position, record) in rows.decode((Int64, ByteBuffer).self) {
          committed.append(StoredRecord(position: UInt64(max(position, 0)), bytes: Data(record.readableBytesView)))
        }
      }
      let decided = try await decide(committed, PostgresLogTransaction(log: self, connection: connection))
      guard let first = decided.first?.position, let newLast = decided.last?.position else { return }
      guard first == UInt64(last) + 1 else {
        throw ServerLogError.gap(after: UInt64(last), next: first)
      }
      try await connection.query(
        "UPDATE \(unescaped: self.tables.meta) SET last_position = \(Int64(newLast)) WHERE id = 1",
        logger: self.logger
      )
      try await self.insert(decided, on: connection)
    }
  }

  /// Returns once a notification names a position after `position`, or the listening connection was
  /// (re)established (notifications may have been missed meanwhile), or the task is cancelled. The first
  /// call starts listening on a connection of its own.
  public func waitForAppends(after position: UInt64) async {
    appendHints.startIfNeeded { [weak self] sink throws(ServerLogError) in
      guard let self else { return }
      try await self.listen(on: self.tables.channel, onListening: sink.listening) { payload in
        if let position = UInt64(payload) { await sink.announced(position) }
      }
    }
    await appendHints.wait(after: position)
  }

  /// The newest position a notification announced: what a node's replication lag is measured against.
  /// Notifications start once the node follows the log (``waitForAppends(after:)``).
  public var announcedPosition: UInt64 { appendHints.latest }

  /// Appends records at the next positions the database assigns, in one transaction, and notifies
  /// ``notificationChannel`` when it commits.
  /// - Returns: The positions taken, in order.
  public func appendAssigningPositions(_ payloads: [Data]) async throws(ServerLogError) -> ClosedRange<UInt64>? {
    guard !payloads.isEmpty else { return nil }
    return try await transaction { connection in
      let rows = try await connection.query(
        """
        UPDATE \(unescaped: self.tables.meta) SET last_position = last_position + \(Int64(payloads.count))
        WHERE id = 1 RETURNING last_position
        """,
        logger: self.logger
      )
      var last: Int64 = 0
      for try await value in rows.decode(Int64.self) { last = value }
      let first = UInt64(last) - UInt64(payloads.count) + 1
      let records = payloads.enumerated().map { StoredRecord(position: first + UInt64($0.offset), bytes: $0.element) }
      try await self.insert(records, on: connection)
      return first...UInt64(last)
    }
  }

  /// Up to `limit` records after `position`, in order: always a gap-free run starting at `position + 1`
  /// (or nothing), since positions commit in order.
  public func records(after position: UInt64, limit: Int) async throws(ServerLogError) -> [StoredRecord] {
    try await withDeadline {
      let rows = try await self.client.query(
        """
        SELECT position, record FROM \(unescaped: self.tables.records) WHERE position > \(Int64(position))
        ORDER BY position LIMIT \(Int64(limit))
        """,
        logger: self.logger
      )
      var records: [StoredRecord] = []
      for try await (position, record) in rows.decode((Int64, ByteBuffer).self) {
        records.append(StoredRecord(position: UInt64(max(position, 0)), bytes: Data(record.readableBytesView)))
      }
      return records
    }
  }

  /// Listens on ``notificationChannel`` and calls `onAppend` with the last position of each append that
  /// commits, until the task is cancelled or the connection drops (then it throws: a notification sent
  /// while nobody listened is lost, so a follower re-reads from its last position after reconnecting).
  /// Notifications are hints for waking a reader early, never the record of what was appended.
  public func listenForAppends(_ onAppend: @escaping @Sendable (UInt64) async -> Void) async throws(ServerLogError) {
    try await listen(on: tables.channel) { payload in
      if let position = UInt64(payload) { await onAppend(position) }
    }
  }

  /// Listens on `channel` and calls `onNotification` with each notification's payload, until the task is
  /// cancelled or the connection drops (then it throws); `onListening` once the `LISTEN` is in effect.
  func listen(
    on channel: String,
    onListening: @escaping @Sendable () -> Void = {},
    _ onNotification: @escaping @Sendable (String) async -> Void
  ) async throws(ServerLogError) {
    do {
      try await client.withConnection { connection in
        try await connection.listen(on: channel) { notifications in
          // postgres-nio calls this once its LISTEN has completed.
          onListening()
          for try await notification in notifications { await onNotification(notification.payload) }
        }
      }
    } catch is CancellationError {
      return
    } catch {
      throw .storage("\(location): listening stopped: \(String(reflecting: error))")
    }
  }

  /// Inserts the records in one statement and notifies the channel (sent when the transaction commits).
  ///
  /// Not on a log of several partitions: a partition has one holder, which applied its own records in the
  /// turn that wrote them, so there is no one to wake; and PostgreSQL serialises every committing
  /// transaction that notified behind one lock on the notification queue (`AccessExclusiveLock` on object 0
  /// of `pg_database`), which is a lock over every partition: with 16 partitions its waits were the only
  /// lock waits left, and grew with the nodes. A write by a node that lost its lease without knowing is
  /// read by the new holder's next turn or its follower's next look (every second).
  private func insert(_ records: [StoredRecord], on connection: PostgresConnection) async throws {
    let positions = records.map { Int64($0.position) }
    let bytes = records.map { ByteBuffer(bytes: $0.bytes) }
    // A position already taken fails the whole write: positions are never overwritten.
    try await connection.query(
      """
      INSERT INTO \(unescaped: tables.records) (position, record)
      SELECT * FROM unnest(\(positions)::bigint[], \(bytes)::bytea[])
      """,
      logger: logger
    )
    guard partitions.count == 1 else { return }
    let last = String(records.last?.position ?? 0)
    try await connection.query("SELECT pg_notify(\(tables.channel), \(last))", logger: logger)
  }
}
