import EventProtocol
import EventServer
import Foundation
import Hummingbird
import HummingbirdTesting
import PartitionHosting
import PostgresServerLog
import SampleApps
import TestScheduling
import Testing

@testable import EventHTTPServer

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A node of a partitioned cluster can be operated as a single server can: `/healthz`, `/readyz` (503 from
/// the start of its shutdown) and `/metrics` with a series per partition, on its admin listener.
@Suite(
  "Partitioned nodes' admin listener: health, readiness, metrics per partition",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PartitionedOperationsTests {
  typealias Host = PartitionHost<StoredRelay<StoredNoteBoard>, ContinuousClock>

  @Test("ready while its leases are held, 503 once it stops; a series per partition, served or not")
  func readinessAndMetrics() async throws {
    let database = try await ScratchDatabase.create()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: PartitionMap(count: 4)!
    )
    let host = try await Host.open(log: log, rotation: 0) { partition in
      try await EventServer.joining(StoredNoteBoard(), on: partition, clock: ContinuousClock()).0
    }
    try await host.rebalance()
    let served = await host.partitionsServed
    #expect(served == [0, 1, 2, 3])
    let alice = try #require(await host.node(for: "alice"))
    _ = try await alice.register(user: "alice")
    let router = Router()
    PartitionAdminRoutes(host: host, partitionCount: 4, metrics: ServerMetrics()).add(to: router)
    try await Hummingbird.Application(router: router).test(.router) { client in
      try await client.execute(uri: "/readyz", method: .get) { #expect($0.status == .ok) }
      try await client.execute(uri: "/metrics", method: .get) { response in
        let text = String(buffer: response.body)
        for partition in 0..<4 {
          #expect(text.contains("event_server_partition_served{partition=\"\(partition)\"} 1"), "\(text)")
          #expect(text.contains("event_server_partition_turns{partition=\"\(partition)\"}"))
          #expect(text.contains("event_server_partition_lag_records{partition=\"\(partition)\"}"))
        }
        #expect(text.contains("event_server_queues 1"))
        // Every per-partition series docs/deploying.md names is there.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
          .deletingLastPathComponent().deletingLastPathComponent()
        let guide = try String(contentsOf: root.appendingPathComponent("docs/deploying.md"), encoding: .utf8)
        let named = Set(guide.matches(of: /event_server_partition_[a-z_]+/).map { String($0.output) })
        #expect(named.count == 4)
        for name in named { #expect(text.contains("# TYPE \(name) "), "docs/deploying.md names \(name)") }
      }
      _ = await host.shutdown()
      try await client.execute(uri: "/readyz", method: .get) { response in
        #expect(response.status == .serviceUnavailable)
        #expect(String(buffer: response.body) == "shutting down\n")
      }
      try await client.execute(uri: "/healthz", method: .get) { #expect($0.status == .ok) }
      try await client.execute(uri: "/metrics", method: .get) { response in
        let text = String(buffer: response.body)
        #expect(text.contains("event_server_partition_served{partition=\"0\"} 0"), "let go: \(text)")
      }
    }
    await log.close()
    try await database.drop()
  }

  @Test("--snapshot-interval on a partitioned node is honoured: every partition it serves writes a snapshot")
  func snapshotIntervalHonoured() async throws {
    let (database, log, server) = try await Self.node { configuration in
      configuration.snapshotInterval = .milliseconds(100)
      // No snapshot by work: a snapshot in the log is the interval's.
      configuration.snapshots = .onlyWhenAsked
    }
    let (ports, bound) = AsyncStream.makeStream(of: Int.self)
    let task = Task { try await server.run(handleSignals: false, onRunning: { bound.yield($0) }) }
    var iterator = ports.makeAsyncIterator()
    _ = try #require(await iterator.next())
    // Every partition's log starts without a snapshot; each gets one while the server runs, not only at its
    // shutdown (at most 60 s: a guard against a hang, not a timing).
    for partition in 0..<2 {
      let partitionLog = try log.partition(partition)
      var snapshot = try await partitionLog.load().snapshot
      for _ in 0..<1_200 where snapshot == nil {
        try await Task.sleep(for: .milliseconds(50))
        snapshot = try await partitionLog.load().snapshot
      }
      #expect(snapshot != nil, "partition \(partition) has no snapshot after 60 s")
    }
    await server.shutdown()
    try await task.value
    await log.close()
    try await database.drop()
  }

  @Test("--admin-port on a partitioned node is honoured: its listener answers, with the log-append series")
  func adminListenerListens() async throws {
    let (database, log, server) = try await Self.node { $0.adminPort = 0 }
    let (adminPorts, adminBound) = AsyncStream.makeStream(of: Int.self)
    let (mainPorts, mainBound) = AsyncStream.makeStream(of: Int.self)
    let task = Task {
      try await server.run(
        handleSignals: false,
        onRunning: { mainBound.yield($0) },
        onAdminRunning: { adminBound.yield($0) }
      )
    }
    var ports = adminPorts.makeAsyncIterator()
    let adminPort = try #require(await ports.next())
    var main = mainPorts.makeAsyncIterator()
    let port = try #require(await main.next())
    let (body, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(adminPort)/healthz")!)
    #expect((response as? HTTPURLResponse)?.statusCode == 200)
    #expect(String(decoding: body, as: UTF8.self) == "ok\n")
    // A registration is a turn of its partition: the node's log-append series count it, as on SQLite.
    var register = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/api/v1/register")!)
    register.httpMethod = "POST"
    let credentials = Data("alice:\(testKeyByUser["alice"]!)".utf8).base64EncodedString()
    register.setValue("Basic \(credentials)", forHTTPHeaderField: "Authorization")
    var registered = 0
    for _ in 0..<100 where registered != 200 {
      let (_, answer) = try await URLSession.shared.data(for: register)
      registered = (answer as? HTTPURLResponse)?.statusCode ?? 0
      // 503 while the partition's lease is still being taken.
      if registered != 200 { try await Task.sleep(for: .milliseconds(100)) }
    }
    #expect(registered == 200)
    let (metrics, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(adminPort)/metrics")!)
    let text = String(decoding: metrics, as: UTF8.self)
    #expect(text.contains("event_server_log_append_duration_seconds_count"), "\(text)")
    #expect(text.contains("event_server_log_records_total"))
    await server.shutdown()
    try await task.value
    await log.close()
    try await database.drop()
  }

  /// A partitioned node of the stored note board on a new database of two partitions, its listener on a free
  /// port and its configuration edited by `configure`; not started.
  private static func node(
    _ configure: (inout EventHTTPServerConfiguration) -> Void
  ) async throws -> (ScratchDatabase, PostgresServerLog, PartitionedEventHTTPServer<StoredNoteBoard>) {
    let database = try await ScratchDatabase.create()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: PartitionMap(count: 2)!
    )
    var configuration = EventHTTPServerConfiguration(keys: testKeys)
    configuration.port = 0
    configure(&configuration)
    let server = PartitionedEventHTTPServer(
      storedApplication: StoredNoteBoard(),
      log: log,
      configuration: configuration,
      logger: quietLogger,
      rotation: 0,
      lookInterval: .milliseconds(100)
    )
    return (database, log, server)
  }
}
