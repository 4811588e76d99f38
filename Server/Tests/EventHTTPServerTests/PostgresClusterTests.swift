import EventProtocol
import EventServer
import Foundation
import PostgresServerLog
import SampleApps
import TestScheduling
import Testing

/// Cluster nodes on a real PostgreSQL: each node has its own connections, as separate processes would.
@Suite(
  "PostgreSQL cluster: nodes on one log answer any queue, wake each other's polls, and agree",
  .enabled(if: testPostgresURL != nil, "set EVENT_SERVER_TEST_POSTGRES_URL (Server/scripts/postgres-tests.sh does)"),
  .hangGuard
)
struct PostgresClusterTests {
  typealias Node = EventServer<NoteBoard, ContinuousClock>

  func join(_ url: String, replication: ReplicationSettings = .init()) async throws -> (Node, PostgresServerLog) {
    let log = try await PostgresServerLog.connect(
      url: url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    let (node, _) = try await Node.joining(
      log,
      application: NoteBoard(),
      clock: ContinuousClock(),
      replication: replication
    )
    return (node, log)
  }

  @Test("a poll parked on one node is woken through LISTEN/NOTIFY by a write on another; any node serves the queue")
  func pollWokenAcrossNodes() async throws {
    let database = try await ScratchDatabase.create()
    // Node a reads the log without a hint only every ten minutes: a poll woken within the test's time
    // limit was woken by the notification (no verdict here depends on how fast the machine is).
    let (a, logA) = try await join(database.url, replication: ReplicationSettings(followInterval: .seconds(600)))
    let (b, logB) = try await join(database.url)
    let registration = try await a.register(user: "bob")
    // Node a listens once it has heard a notification (of its own writes): a hint sent before it listened
    // would be lost, and would wait for the ten-minute read.
    while logA.announcedPosition == 0 {
      _ = try await a.register(user: "carol")
      try await Task.sleep(for: .milliseconds(50))
    }
    let poll = Task { try await a.events(queueID: registration.queueID, user: "bob", lastEventID: -1) }
    await a.waitForParkedPolls(count: 1)
    try await b.handle(.post("from b", to: ["bob"]), from: "alice")
    let events = try await poll.value
    #expect(events.map(\.body) == [.payload(.note(text: "from b"))])
    let again = try await b.events(queueID: registration.queueID, user: "bob", lastEventID: -1, dontBlock: true)
    #expect(again.map(\.id) == events.map(\.id))
    await a.shutdown()
    await b.shutdown()
    await logA.close()
    await logB.close()
    try await database.drop()
  }

  @Test("three nodes writing at once: gap-free positions, the same state on every node and on a fourth started after")
  func concurrentNodesAgree() async throws {
    let database = try await ScratchDatabase.create()
    var nodes: [(Node, PostgresServerLog)] = []
    for _ in 0..<3 { nodes.append(try await join(database.url)) }
    let servers = nodes.map(\.0)
    try await withThrowingTaskGroup(of: Void.self) { group in
      for (index, node) in servers.enumerated() {
        group.addTask {
          for number in 1...30 {
            _ = try await node.applyMutation(
              .post("n\(index)-\(number)", to: ["alice"]),
              from: "alice",
              clientID: ClientID(rawValue: "c\(index)"),
              mutationID: MutationID(rawValue: UInt64(number))
            )
          }
        }
      }
      try await group.waitForAll()
    }
    let last = try await nodes[0].1.records(after: 0, limit: 10_000)
    #expect(last.map(\.position) == Array(1...UInt64(last.count)))
    let (late, lateLog) = try await join(database.url)
    var notes: [[String]] = []
    for node in servers + [late] {
      await node.waitUntilAppended(through: UInt64(last.count))
      notes.append(await node.application.notes["alice"] ?? [])
    }
    #expect(notes[0].count == 90)
    #expect(Set(notes.map { $0 }).count == 1, "every node holds the same notes in the same order")
    for (node, log) in nodes + [(late, lateLog)] {
      await node.shutdown()
      await log.close()
    }
    try await database.drop()
  }

  @Test("a database restored from an older copy while every node was down: no event id is handed out again")
  func restoredDatabaseNeverRepeatsIDs() async throws {
    let database = try await ScratchDatabase.create()
    let (a, logA) = try await join(database.url)
    let queue = try await a.register(user: "alice", eventTypes: ["note"]).queueID
    try await a.handle(.post("before", to: ["alice"]), from: "bob")
    let finger = try #require(
      try await a.events(queueID: queue, user: "alice", lastEventID: -1, dontBlock: true).last?.id
    )
    _ = try await a.events(queueID: queue, user: "alice", lastEventID: finger, dontBlock: true)
    // The copy (as pg_dump would take it), then a write alice's client sees, then every node goes.
    for table in ["event_log", "event_log_meta", "event_snapshot"] {
      try await ScratchDatabase.admin("CREATE TABLE copy_\(table) AS SELECT * FROM \(table)", on: database.url)
    }
    try await a.handle(.post("lost", to: ["alice"]), from: "bob")
    let lostFinger = try #require(
      try await a.events(queueID: queue, user: "alice", lastEventID: finger, dontBlock: true).last?.id
    )
    await a.shutdown()
    await logA.close()
    for table in ["event_log", "event_log_meta", "event_snapshot"] {
      try await ScratchDatabase.admin("DELETE FROM \(table)", on: database.url)
      try await ScratchDatabase.admin("INSERT INTO \(table) SELECT * FROM copy_\(table)", on: database.url)
    }
    // The first node to start again records a recovery; the one after it joins.
    let (b, logB) = try await join(database.url)
    let (c, logC) = try await join(database.url)
    try await b.handle(.post("new", to: ["alice"]), from: "bob")
    let fresh = try await c.events(queueID: queue, user: "alice", lastEventID: finger, dontBlock: true)
    #expect(!fresh.map(\.id).contains(lostFinger))
    await #expect(throws: EventAPIError.badEventQueueID(queue)) {
      _ = try await b.events(queueID: queue, user: "alice", lastEventID: lostFinger, dontBlock: true)
    }
    for node in [b, c] { await node.shutdown() }
    await logB.close()
    await logC.close()
    try await database.drop()
  }
}
