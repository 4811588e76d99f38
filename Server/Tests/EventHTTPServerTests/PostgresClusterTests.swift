import EventProtocol
import EventServer
import Foundation
import PostgresServerLog
import SampleApps
import Testing

/// Cluster nodes on a real PostgreSQL: each node has its own connections, as separate processes would.
@Suite(
  "PostgreSQL cluster: nodes on one log answer any queue, wake each other's polls, and agree",
  .enabled(if: testPostgresURL != nil, "set EVENT_SERVER_TEST_POSTGRES_URL (Server/scripts/postgres-tests.sh does)"),
  .timeLimit(.minutes(2))
)
struct PostgresClusterTests {
  typealias Node = EventServer<NoteBoard, ContinuousClock>

  func join(_ url: String) async throws -> (Node, PostgresServerLog) {
    let log = try await PostgresServerLog.connect(url: url, logger: quietLogger)
    let (node, _) = try await Node.joining(log, application: NoteBoard(), clock: ContinuousClock())
    return (node, log)
  }

  @Test("a poll parked on one node is woken through LISTEN/NOTIFY by a write on another; any node serves the queue")
  func pollWokenAcrossNodes() async throws {
    let database = try await ScratchDatabase.create()
    let (a, logA) = try await join(database.url)
    let (b, logB) = try await join(database.url)
    let registration = try await a.register(user: "bob")
    let poll = Task { try await a.events(queueID: registration.queueID, user: "bob", lastEventID: -1) }
    await a.waitForParkedPolls(count: 1)
    let sent = ContinuousClock.now
    try await b.handle(.post("from b", to: ["bob"]), from: "alice")
    let events = try await poll.value
    let lag = ContinuousClock.now - sent
    #expect(events.map(\.body) == [.payload(.note(text: "from b"))])
    // Woken by the notification, not the one-second read: well under it.
    #expect(lag < .milliseconds(900), "replication lag \(lag)")
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
}
