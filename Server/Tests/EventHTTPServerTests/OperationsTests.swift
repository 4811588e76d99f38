import EventProtocol
import EventServer
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import TestScheduling
import Testing
import UpdateMachine

@testable import EventHTTPServer

#if canImport(Glibc)
  import Glibc
#endif

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The admin listener: health, readiness and Prometheus metrics on loopback, apart from the API.
@Suite("Operations: /healthz, /readyz, /metrics", .serialized, .hangGuard)
struct OperationsTests {
  @Test("readiness answers 503 once the input log failed (writes refused) and while shutting down; health stays 200")
  func readinessFails() async throws {
    let log = InMemoryServerLog()
    let (failing, _) = try await EventServer.recovering(
      from: log,
      application: KanbanServer(team: ["alice"]),
      clock: ContinuousClock()
    )
    try await checkReadiness(failing, reason: "the input log failed\n") {
      log.failEveryCall(with: .storage("the disk is gone"))
      await #expect(throws: ServerLogError.self) {
        try await failing.handle(CardMoved(card: "c", column: "done"), from: "alice")
      }
    }
    let stopping = EventServer(application: KanbanServer(team: ["alice"]), clock: ContinuousClock())
    try await checkReadiness(stopping, reason: "shutting down\n") { await stopping.shutdown() }
  }

  /// `/readyz` answers 200, then 503 with `reason` once `breakIt` ran; `/healthz` stays 200.
  private func checkReadiness(
    _ events: EventServer<KanbanServer, ContinuousClock>,
    reason: String,
    breakIt: @escaping @Sendable () async -> Void
  ) async throws {
    let router = Router()
    AdminRoutes(server: events, metrics: ServerMetrics()).add(to: router)
    try await Hummingbird.Application(router: router).test(.router) { client in
      try await client.execute(uri: "/readyz", method: .get) { #expect($0.status == .ok) }
      await breakIt()
      try await client.execute(uri: "/readyz", method: .get) { response in
        #expect(response.status == .serviceUnavailable)
        #expect(String(buffer: response.body) == reason)
      }
      try await client.execute(uri: "/healthz", method: .get) { #expect($0.status == .ok) }
    }
  }

  @Test("health and readiness answer; metrics count requests by route and status, time mutations and log appends")
  func adminListener() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ops-\(UUID())")
    defer { try? FileManager.default.removeItem(at: directory) }
    var configuration = try adminConfiguration(directory)
    configuration.applicationVersion = "kanban-2.3.1"
    var logger = Logger(label: "ops-test")
    logger.logLevel = .warning
    let server = EventHTTPServer(
      application: KanbanServer(team: ["alice"]),
      configuration: configuration,
      logger: logger
    )
    let started = try await RunningWithAdmin.start(server)
    let (port, admin, running) = (started.port, started.admin, started.running)

    #expect(try await get(admin.appendingPathComponent("healthz")).status == 200)
    #expect(try await get(admin.appendingPathComponent("readyz")).status == 200)

    // A client that hangs up during its long-poll: a client-closed request (499), not a failure of the server.
    let registered = try await RawHTTP(base: URL(string: "http://127.0.0.1:\(port)")!).send(
      "POST",
      "api/v1/register",
      as: "alice",
      key: "alice-secret-key"
    )
    let queueID = try #require(
      (try JSONSerialization.jsonObject(with: registered.body) as? [String: Any])?["queue_id"] as? String
    )
    let events = try #require(server.eventServer)
    let parked = await events.parkedPollCount
    let hangUp = try #require(
      await offThePool {
        HungUpPoll(to: port, path: "/api/v1/events?queue_id=\(queueID)&last_event_id=-1", key: "alice:alice-secret-key")
      }
    )
    await events.waitForParkedPolls(count: parked + 1)
    hangUp.close()
    // The server hears the hang-up and counts the answer nobody reads; wait for it (a deadline, not a pace).
    let hungUp = #"event_server_requests_total{route="/api/v1/events",status="499"} 1"#
    let deadline = ContinuousClock.now + .seconds(20)
    while ContinuousClock.now < deadline, try await !get(admin.appendingPathComponent("metrics")).body.contains(hungUp)
    {
      try await Task.sleep(for: .milliseconds(20))
    }

    #expect(try await get(admin.appendingPathComponent("metrics")).body.contains(hungUp))

    let machine = UpdateMachine(
      reducer: KanbanReducer(),
      transport: URLSessionTransport<Board, CardMoved, CardMoved>(
        baseURL: URL(string: "http://127.0.0.1:\(port)")!,
        credentials: .init(user: "alice", apiKey: "alice-secret-key")
      ),
      store: InMemoryStore()
    )
    await machine.start()
    _ = await machine.waitUntilLive()
    _ = await machine.submit(CardMoved(card: "ops", column: "done"))
    _ = await machine.waitUntilSettled()
    await machine.stop()
    // A request without a key, to a route that does not exist.
    _ = try await get(URL(string: "http://127.0.0.1:\(port)/api/v1/nothing-here")!)
    // A wrong key: refused, and counted by its code.
    let refused = try await RawHTTP(base: URL(string: "http://127.0.0.1:\(port)")!).send(
      "POST",
      "api/v1/register",
      as: "alice",
      key: "not-alice-key"
    )
    #expect(refused.status == 401)
    let (status, metrics) = try await get(admin.appendingPathComponent("metrics"))
    #expect(status == 200)
    #expect(metrics.contains(#"event_server_requests_total{route="/api/v1/register",status="200"} 2"#))
    #expect(metrics.contains(#"event_server_requests_total{route="/api/v1/mutations",status="200"} 1"#))
    #expect(metrics.contains(#"route="other""#))
    #expect(metrics.contains("event_server_mutation_duration_seconds_count 1"))
    #expect(metrics.contains("event_server_log_append_duration_seconds_count"))
    #expect(metrics.contains("event_server_queues 2"))
    #expect(metrics.contains("event_server_events_delivered_total"))
    // The machine's own long-poll, cut when it stopped, may add one more: a 499 too, never a 5xx.
    #expect(metrics.contains(#"route="/api/v1/events",status="499""#))
    #expect(!metrics.contains(#"status="503""#))
    #expect(!metrics.contains("SERVICE_UNAVAILABLE"), "a hang-up is no refusal")
    #expect(metrics.contains(#"event_server_refusals_total{code="UNAUTHORIZED"} 1"#))
    // The application's own version, the library's beside it.
    #expect(metrics.contains(#"event_server_build_info{version="kanban-2.3.1",library="\#(ServerMetrics.version)"} 1"#))
    // Every series docs/deploying.md names exists.
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent().deletingLastPathComponent()
    let guide = try String(contentsOf: root.appendingPathComponent("docs/deploying.md"), encoding: .utf8)
    // A cluster node's own series are checked on one (ClusterOperationsTests), a partitioned node's on one
    // (PartitionedOperationsTests).
    let named = Set(guide.matches(of: /event_server_[a-z_]+/).map { String($0.output) }).filter {
      !$0.hasPrefix("event_server_replication") && !$0.hasPrefix("event_server_log_rejoins")
        && !$0.hasPrefix("event_server_partition_")
    }
    #expect(named.count >= 7)
    for name in named.sorted() {
      #expect(metrics.contains("\n\(name)") || metrics.contains("# TYPE \(name) "), "docs/deploying.md names \(name)")
    }

    await server.shutdown()
    try await running.value
  }

  @Test("readiness answers 503 from the shutdown's start until the API's listener has closed")
  func readinessDuringShutdown() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ops-\(UUID())")
    defer { try? FileManager.default.removeItem(at: directory) }
    var configuration = try adminConfiguration(directory)
    // Long enough that the drain waits for the held request below, not for this.
    configuration.shutdownGrace = .seconds(300)
    var logger = Logger(label: "ops-test")
    logger.logLevel = .critical
    // A route that holds its request until the test lets it go: the API's listener drains until it ends.
    let (entered, enteredContinuation) = AsyncStream.makeStream(of: Void.self)
    let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
    let server = EventHTTPServer(
      application: KanbanServer(team: ["alice"]),
      configuration: configuration,
      logger: logger
    ) { router, _, _ in
      router.get("held") { _, _ in
        enteredContinuation.yield()
        for await _ in release { break }
        return "released"
      }
    }
    let started = try await RunningWithAdmin.start(server)
    #expect(try await get(started.admin.appendingPathComponent("readyz")).status == 200)
    let held = Task { try await get(URL(string: "http://127.0.0.1:\(started.port)/held")!) }
    for await _ in entered { break }
    let stopping = Task { await server.shutdown() }
    // Until the shutdown has begun /readyz answers 200; from then on 503.
    var answer = try await get(started.admin.appendingPathComponent("readyz"))
    while answer.status == 200 {
      try await Task.sleep(for: .milliseconds(10))
      answer = try await get(started.admin.appendingPathComponent("readyz"))
    }
    #expect(answer.status == 503 && answer.body == "shutting down\n")
    // Once the API's listener drains (it accepts no more connections), the admin listener still answers.
    let port = started.port
    while let probe = await offThePool({ loopbackSocket(from: "127.0.0.1", to: port, receiveTimeoutSeconds: 1) }) {
      _ = Glibc.close(probe)
      try await Task.sleep(for: .milliseconds(10))
    }
    let draining = try await get(started.admin.appendingPathComponent("readyz"))
    #expect(draining.status == 503 && draining.body == "shutting down\n")
    releaseContinuation.yield()
    #expect(try await held.value.body == "released")
    await stopping.value
    try await started.running.value
  }

  /// Alice's key, free ports for the API and the admin listener, the state in `directory`, no timed snapshots.
  private func adminConfiguration(_ directory: URL) throws -> EventHTTPServerConfiguration {
    var configuration = EventHTTPServerConfiguration(keys: try APIKeys(["alice": "alice-secret-key"]))
    configuration.port = 0
    configuration.adminPort = 0
    configuration.dataDirectory = directory
    configuration.snapshotInterval = nil
    return configuration
  }

  private func get(_ url: URL) async throws -> (status: Int, body: String) {
    let (data, response) = try await URLSession.shared.data(from: url)
    return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
  }
}

/// A long-poll sent on a socket of its own, then hung up on (``close()``): a client that goes away.
final class HungUpPoll: Sendable {
  private let socket: Int32

  init?(to port: Int, path: String, key: String) {
    guard let socket = loopbackSocket(from: "127.0.0.1", to: port, receiveTimeoutSeconds: 5) else { return nil }
    self.socket = socket
    let request =
      "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      + "Authorization: Basic \(Data(key.utf8).base64EncodedString())\r\n\r\n"
    guard request.withCString({ send(socket, $0, strlen($0), 0) }) > 0 else { return nil }
  }

  func close() {
    _ = Glibc.close(socket)
  }
}
