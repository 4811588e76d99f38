import EventProtocol
import EventServer
import Foundation
import PartitionHosting
import PostgresServerLog
import SampleApps
import Synchronization
import TestScheduling
import Testing

private func frame(_ text: String) -> Data { ServerLogCodec.frame(Data(text.utf8)) }

@Suite(
  "PostgreSQL log partitions: a count fixed at creation, commit order per partition, no lock over the log, leases",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PostgresPartitionTests {
  @Test("the partition count is fixed when the log is created: another count is refused, nothing changed")
  func countFixedAtCreation() async throws {
    let database = try await ScratchDatabase.create()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: PartitionMap(count: 4)
    )
    #expect(log.partitions.count == 4)
    let third = try log.partition(3)
    try await third.append([StoredRecord(position: 1, bytes: frame("p3"))])
    #expect(throws: ServerLogError.partitionCount(found: 4, asked: 5)) { try log.partition(4) }
    await third.close()
    await log.close()
    do {
      _ = try await PostgresServerLog.connect(
        url: database.url,
        logger: quietLogger,
        operationTimeout: testTimeout(.seconds(5)),
        partitions: PartitionMap(count: 8)
      )
      Issue.record("a log of 4 partitions was opened as 8")
    } catch {
      #expect(error.isSameKind(as: .partitionCount(found: 4, asked: 8)))
      #expect("\(error)".contains("4 partitions"))
    }
    let reopened = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    #expect(reopened.partitions.count == 4)
    let again = try reopened.partition(3)
    #expect(try await again.load().records.map(\.bytes) == [frame("p3")])
    #expect(try await reopened.load().records.isEmpty)
    await again.close()
    await reopened.close()
    try await database.drop()
  }

  @Test("a log of schema version 1 (before partitions) opens as one partition, its records kept")
  func upgradesVersionOne() async throws {
    let database = try await ScratchDatabase.create()
    for statement in [
      """
      CREATE TABLE event_log_meta (
        id integer PRIMARY KEY CHECK (id = 1), schema_version integer NOT NULL, last_position bigint NOT NULL)
      """,
      "CREATE TABLE event_log (position bigint PRIMARY KEY, record bytea NOT NULL)",
      """
      CREATE TABLE event_snapshot (
        id integer PRIMARY KEY CHECK (id = 1), position bigint NOT NULL, state bytea NOT NULL)
      """,
      "INSERT INTO event_log_meta (id, schema_version, last_position) VALUES (1, 1, 0)",
    ] {
      try await ScratchDatabase.admin(statement, on: database.url)
    }
    let first = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    try await first.append([StoredRecord(position: 1, bytes: frame("old"))])
    await first.close()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: .single
    )
    #expect(log.partitions == .single)
    #expect(try await log.load().records.map(\.bytes) == [frame("old")])
    await log.close()
    try await database.drop()
  }

  /// A node starts while the others append: its set-up must not wait for the append in progress on
  /// partition 0's counter row (found by the partitioned video soak: a restarted node's start locked
  /// `event_log_meta` whole, behind the appends, and gave up at its deadline). Here the append holds the row
  /// until the start has returned, so a start that waited for it would fail at its deadline.
  @Test("a node starts on a current schema while an append holds partition 0's counter; a missing table is made")
  func startTakesNoLockAppendsHold() async throws {
    let database = try await ScratchDatabase.create()
    let created = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: PartitionMap(count: 3)
    )
    await created.close()
    let running = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(300)),
      partitions: PartitionMap(count: 3)
    )
    let started = try await running.transaction { transaction in
      _ = try await transaction.execute("UPDATE event_log_meta SET last_position = last_position WHERE id = 1", [])
      let log = try await PostgresServerLog.connect(
        url: database.url,
        logger: quietLogger,
        operationTimeout: testTimeout(.seconds(60)),
        partitions: PartitionMap(count: 3)
      )
      await log.close()
      return log.partitions.count
    }
    #expect(started == 3)
    await running.close()
    // A table missing from a log of the current version is made again at the next start.
    try await ScratchDatabase.admin("DROP TABLE event_snapshot_p2", on: database.url)
    let repaired = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    #expect(repaired.partitions.count == 3)
    let second = try repaired.partition(2)
    try await second.append([StoredRecord(position: 1, bytes: frame("p2"))])
    try await second.saveSnapshot(StoredSnapshot(position: 1, bytes: Data("state".utf8)))
    #expect(try await second.load().snapshot?.bytes == Data("state".utf8))
    await second.close()
    await repaired.close()
    try await database.drop()
  }

  /// On each of three partitions at once, appenders race and readers read: every reader of a partition
  /// sees that partition's positions 1, 2, 3… with none skipped or reordered, and only its own records.
  @Test("racing appenders and readers on three partitions at once: each partition gap-free, holding only its own")
  func commitOrderPerPartition() async throws {
    let database = try await ScratchDatabase.create()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: PartitionMap(count: 3)
    )
    let views = try (0..<3).map { try log.partition($0) }
    let appenders = 3
    let batches = 20
    let total = appenders * batches * 2
    try await withThrowingTaskGroup(of: (Int, [String]).self) { group in
      for (partition, view) in views.enumerated() {
        for appender in 0..<appenders {
          group.addTask {
            for batch in 0..<batches {
              let payloads = (0..<2).map { Data("\(partition)/\(appender)-\(batch * 2 + $0)".utf8) }
              _ = try await view.appendAssigningPositions(payloads)
            }
            return (partition, [])
          }
        }
        for reader in 0..<2 {
          group.addTask {
            var seen: [String] = []
            var last: UInt64 = 0
            while seen.count < total {
              for record in try await view.records(after: last, limit: 3 + reader * 5) {
                guard record.position == last + 1 else {
                  throw PartitionPositionSkipped(partition: partition, expected: last + 1, found: record.position)
                }
                last = record.position
                seen.append(String(decoding: record.bytes, as: UTF8.self))
              }
            }
            return (partition, seen)
          }
        }
      }
      var readings: [Int: [[String]]] = [:]
      for try await (partition, seen) in group where !seen.isEmpty { readings[partition, default: []].append(seen) }
      #expect(readings.keys.sorted() == [0, 1, 2])
      for (partition, readers) in readings {
        #expect(readers.count == 2 && readers[0] == readers[1])
        #expect(readers[0].allSatisfy { $0.hasPrefix("\(partition)/") })
        #expect(Set(readers[0]).count == total)
        for appender in 0..<appenders {
          let own = readers[0].filter { $0.hasPrefix("\(partition)/\(appender)-") }
            .map { Int($0.split(separator: "-")[1])! }
          #expect(own == Array(0..<own.count))
        }
      }
    }
    for view in views { await view.close() }
    await log.close()
    try await database.drop()
  }

  /// A turn on partition 0 holds that partition's counter row until it is let go; meanwhile a turn and an
  /// append on partition 1 commit. With one lock over the whole log they would wait for partition 0's turn
  /// and fail at their deadline.
  @Test("a turn held open on partition 0 does not stop partition 1's turns and appends")
  func noLockOverTheLog() async throws {
    let database = try await ScratchDatabase.create()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: PartitionMap(count: 2)
    )
    let zero = try log.partition(0)
    let one = try log.partition(1)
    let (entered, enter) = AsyncStream.makeStream(of: Void.self)
    let (released, release) = AsyncStream.makeStream(of: Void.self)
    let heldTurn = Task {
      try await zero.appendTurn(after: 0) { _ in
        enter.yield()
        var iterator = released.makeAsyncIterator()
        _ = await iterator.next()
        return [StoredRecord(position: 1, bytes: frame("zero"))]
      }
    }
    var waiting = entered.makeAsyncIterator()
    _ = await waiting.next()
    // Partition 0's row is locked now, until the turn is let go.
    try await one.appendTurn(after: 0) { committed in
      #expect(committed.isEmpty)
      return [StoredRecord(position: 1, bytes: frame("one"))]
    }
    #expect(try await one.appendAssigningPositions([frame("one again")]) == 2...2)
    #expect(try await one.records(after: 0, limit: 10).map(\.bytes) == [frame("one"), frame("one again")])
    #expect(try await zero.records(after: 0, limit: 10).isEmpty)
    release.yield()
    try await heldTurn.value
    #expect(try await zero.records(after: 0, limit: 10).map(\.bytes) == [frame("zero")])
    await zero.close()
    await one.close()
    await log.close()
    try await database.drop()
  }

  @Test("leases: one holder per partition; a node's death (its session ended) frees them for another")
  func leasesMoveWhenANodeDies() async throws {
    let database = try await ScratchDatabase.create()
    let logA = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(2)),
      partitions: PartitionMap(count: 4)
    )
    let logB = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    let nodeA = try await PartitionLeases.open(on: logA)
    let nodeB = try await PartitionLeases.open(on: logB)
    for partition in 0..<4 { #expect(try await nodeA.tryAcquire(partition)) }
    #expect(try await nodeB.tryAcquire(2) == false)
    #expect(try await nodeB.survey() == LeaseSurvey(liveNodes: 2, mine: [], heldByOthers: [0, 1, 2, 3]))
    #expect(try await nodeA.survey() == LeaseSurvey(liveNodes: 2, mine: [0, 1, 2, 3], heldByOthers: []))
    // What node B's plan says: a fair share of two, none free yet; node A lets two go.
    let planA = PartitionLeasePlan(partitions: 4, liveNodes: 2, mine: nodeA.held, heldByOthers: [], rotation: 0)
    #expect(planA.release == [2, 3])
    for partition in planA.release { try await nodeA.release(partition) }
    #expect(try await nodeB.tryAcquire(2))
    #expect(try await nodeB.tryAcquire(3))
    #expect(try await nodeB.tryAcquire(0) == false)
    // Node A's session dies as a SIGKILLed node's would: PostgreSQL ends it, and its leases go with it.
    try await ScratchDatabase.admin(
      """
      SELECT pg_terminate_backend(pid, 5000) FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND classid::bigint = \(0x6576_5074) AND objid::bigint = 0
      """,
      on: database.url
    )
    #expect(try await nodeB.survey() == LeaseSurvey(liveNodes: 1, mine: [2, 3], heldByOthers: []))
    #expect(try await nodeB.tryAcquire(0))
    #expect(try await nodeB.tryAcquire(1))
    // Node A hears of it at its next request: an error, or no answer within its deadline; either way its
    // leases are lost.
    await #expect(throws: ServerLogError.self) { try await nodeA.tryAcquire(1) }
    #expect(nodeA.held.isEmpty && nodeA.lost != nil)
    #expect(nodeB.held == [0, 1, 2, 3])
    await nodeA.close()
    await nodeB.close()
    await logA.close()
    await logB.close()
    try await database.drop()
  }
}

extension PostgresPartitionTests {
  typealias Host = PartitionHost<NoteBoard, ContinuousClock>

  static func host(on log: PostgresServerLog, rotation: Int) async throws -> Host {
    try await Host.open(log: log, rotation: rotation) { partition in
      try await EventServer.joining(partition, application: NoteBoard(), clock: ContinuousClock()).0
    }
  }

  /// Two hosts share four partitions, then one dies: its partitions move to the other, and a client's
  /// queue goes on there with the same id and finger, without registering again. Before the dead host
  /// notices, its node still writes to a partition it lost: the new holder applies that write in order.
  @Test("partitions spread over two hosts and move when one dies; a client keeps its queue, nothing lost")
  func takeover() async throws {
    let database = try await ScratchDatabase.create()
    let map = PartitionMap(count: 4)!
    let logA = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(2)),
      partitions: map
    )
    let logB = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    let hostA = try await Self.host(on: logA, rotation: 0)
    #expect(try await hostA.rebalance().taken == [0, 1, 2, 3])
    let bob = UserID("bob")  // partition 0: held by A, then by B
    #expect(map.partition(of: bob) == 0)
    let bobNodeOnA = try #require(await hostA.node(for: bob))
    let queue = try await bobNodeOnA.register(user: bob)
    try await bobNodeOnA.handle(.post("one", to: [bob]), from: bob)

    // A second host: a share of two each once A lets two go.
    let hostB = try await Self.host(on: logB, rotation: 1)
    #expect(try await hostB.rebalance() == Host.Change())
    #expect(try await hostA.rebalance().released == [2, 3])
    #expect(try await hostB.rebalance().taken == [2, 3])
    #expect(await hostA.partitionsServed == [0, 1])
    #expect(await hostB.partitionsServed == [2, 3])
    let servedByA = await hostA.node(for: bob) != nil
    let servedByB = await hostB.node(for: bob) != nil
    #expect(servedByA != servedByB)

    // Host A's session dies as a SIGKILLed node's would; B takes A's partitions at its next look.
    try await ScratchDatabase.admin(
      """
      SELECT pg_terminate_backend(pid, 5000) FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND classid::bigint = \(0x6576_5074) AND objid::bigint = 0
      """,
      on: database.url
    )
    #expect(try await hostB.rebalance().taken.sorted() == [0, 1])
    #expect(await hostB.partitionsServed == [0, 1, 2, 3])
    // A's old node does not know yet: its write still commits in a turn, after what others committed.
    try await bobNodeOnA.handle(.post("late", to: [bob]), from: bob)
    let bobNodeOnB = try #require(await hostB.node(for: bob))
    try await bobNodeOnB.handle(.post("two", to: [bob]), from: bob)
    var texts: [String] = []
    var last = queue.lastEventID
    while !texts.contains("two") {
      let events = try await bobNodeOnB.events(queueID: queue.queueID, user: bob, lastEventID: last)
      last = events.last?.id ?? last
      texts += events.compactMap { if case .payload(.note(let text)) = $0.body { text } else { nil } }
    }
    #expect(texts == ["one", "late", "two"])
    // A finds its leases lost at its next look and stops serving.
    let change = try await hostA.rebalance()
    #expect(change.lost == [0, 1])
    #expect(await hostA.partitionsServed.isEmpty)
    await hostA.shutdown()
    await hostB.shutdown()
    await logA.close()
    await logB.close()
    try await database.drop()
  }
}

extension PostgresPartitionTests {
  typealias StoredHost = PartitionHost<StoredRelay<StoredNoteBoard>, ContinuousClock>

  /// Polls until a note arrives (heartbeats skipped).
  static func nextNotes(
    _ node: StoredHost.Node,
    queue: Registration<StoredNoteBoard.Snapshot?>,
    user: UserID,
    after last: inout Int
  ) async throws -> [String] {
    while true {
      let events = try await node.events(queueID: queue.queueID, user: user, lastEventID: last)
      last = events.last?.id ?? last
      let notes = events.compactMap { if case .payload(.note(let text)) = $0.body { text } else { nil } }
      if !notes.isEmpty { return notes }
    }
  }

  /// A stored note board on four partitions: a note from a user of one partition to users of three
  /// reaches each recipient's queue on its own partition's node (through that partition's inbox), once,
  /// even when the mutation is sent again; the inbox is empty afterwards.
  @Test("a command's deliveries reach users of other partitions through their inboxes, once")
  func deliveriesAcrossPartitions() async throws {
    let database = try await ScratchDatabase.create()
    let map = PartitionMap(count: 4)!
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: map
    )
    let host = try await StoredHost.open(log: log, rotation: 0) { partition in
      try await EventServer.joining(StoredNoteBoard(), on: partition, clock: ContinuousClock()).0
    }
    #expect(try await host.rebalance().taken == [0, 1, 2, 3])
    let (bob, carol, alice) = (UserID("bob"), UserID("carol"), UserID("alice"))
    #expect([bob, carol, alice].map { map.partition(of: $0) } == [0, 2, 3])
    let bobNode = try #require(await host.node(for: bob))
    let aliceNode = try #require(await host.node(for: alice))
    let carolNode = try #require(await host.node(for: carol))
    let bobQueue = try await bobNode.register(user: bob)
    let aliceQueue = try await aliceNode.register(user: alice)
    let carolQueue = try await carolNode.register(user: carol)
    for _ in 0..<2 {  // the second is a repeat: answered from the mutation memory, delivered nowhere again
      _ = try await carolNode.applyMutation(
        .request(.post("hi", to: [alice, bob, carol])),
        from: carol,
        clientID: "carol-phone",
        mutationID: MutationID(1)
      )
    }
    _ = try await carolNode.applyMutation(
      .request(.post("again", to: [alice, bob])),
      from: carol,
      clientID: "carol-phone",
      mutationID: MutationID(2)
    )
    var (bobLast, aliceLast, carolLast) = (bobQueue.lastEventID, aliceQueue.lastEventID, carolQueue.lastEventID)
    var aliceNotes = try await Self.nextNotes(aliceNode, queue: aliceQueue, user: alice, after: &aliceLast)
    if aliceNotes.count < 2 {
      aliceNotes += try await Self.nextNotes(aliceNode, queue: aliceQueue, user: alice, after: &aliceLast)
    }
    var bobNotes = try await Self.nextNotes(bobNode, queue: bobQueue, user: bob, after: &bobLast)
    if bobNotes.count < 2 { bobNotes += try await Self.nextNotes(bobNode, queue: bobQueue, user: bob, after: &bobLast) }
    #expect(aliceNotes == ["hi", "again"])
    #expect(bobNotes == ["hi", "again"])
    #expect(try await Self.nextNotes(carolNode, queue: carolQueue, user: carol, after: &carolLast) == ["hi"])
    // Nothing more for anyone: a dont_block poll after what each received is empty of notes.
    for (node, queue, user, last) in [
      (aliceNode, aliceQueue, alice, aliceLast), (bobNode, bobQueue, bob, bobLast),
    ] {
      let more = try await node.events(queueID: queue.queueID, user: user, lastEventID: last, dontBlock: true)
      #expect(more.allSatisfy { if case .payload = $0.body { false } else { true } })
    }
    #expect(try await log.partition(3).hasInbox() == false)
    #expect(try await log.partition(0).hasInbox() == false)
    #expect(
      try await aliceNode.readStoredState { try await StoredNoteBoard.notes(of: alice, in: $0) } == ["hi", "again"]
    )
    await host.shutdown()
    await log.close()
    try await database.drop()
  }
}

private struct PartitionPositionSkipped: Error {
  let partition: Int
  let expected: UInt64
  let found: UInt64
}
