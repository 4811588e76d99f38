import EventProtocol
import EventServer
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Testing
import UpdateMachine

@testable import EventHTTPServer

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The admin listener: health, readiness and Prometheus metrics on loopback, apart from the API.
@Suite("Operations: /healthz, /readyz, /metrics", .serialized, .timeLimit(.minutes(1)))
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
    var configuration = EventHTTPServerConfiguration(keys: try APIKeys(["alice": "alice-secret-key"]))
    configuration.port = 0
    configuration.adminPort = 0
    configuration.dataDirectory = directory
    configuration.snapshotInterval = nil
    var logger = Logger(label: "ops-test")
    logger.logLevel = .warning
    let server = EventHTTPServer(
      application: KanbanServer(team: ["alice"]),
      configuration: configuration,
      logger: logger
    )
    let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
    let (adminPorts, adminContinuation) = AsyncStream.makeStream(of: Int.self)
    let running = Task {
      try await server.run(handleSignals: false) {
        portContinuation.yield($0)
      } onAdminRunning: {
        adminContinuation.yield($0)
      }
    }
    var portIterator = ports.makeAsyncIterator()
    var adminIterator = adminPorts.makeAsyncIterator()
    let port = try #require(await portIterator.next())
    let adminPort = try #require(await adminIterator.next())
    let admin = URL(string: "http://127.0.0.1:\(adminPort)")!

    #expect(try await get(admin.appendingPathComponent("healthz")).status == 200)
    #expect(try await get(admin.appendingPathComponent("readyz")).status == 200)

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

    let (status, metrics) = try await get(admin.appendingPathComponent("metrics"))
    #expect(status == 200)
    #expect(metrics.contains(#"event_server_requests_total{route="/api/v1/register",status="200"} 1"#))
    #expect(metrics.contains(#"event_server_requests_total{route="/api/v1/mutations",status="200"} 1"#))
    #expect(metrics.contains(#"route="other""#))
    #expect(metrics.contains("event_server_mutation_duration_seconds_count 1"))
    #expect(metrics.contains("event_server_log_append_duration_seconds_count"))
    #expect(metrics.contains("event_server_queues 1"))
    #expect(metrics.contains("event_server_events_delivered_total"))

    await server.shutdown()
    try await running.value
  }

  private func get(_ url: URL) async throws -> (status: Int, body: String) {
    let (data, response) = try await URLSession.shared.data(from: url)
    return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
  }
}
