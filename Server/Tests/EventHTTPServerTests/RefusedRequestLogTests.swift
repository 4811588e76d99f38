import EventProtocol
import EventServer
import Foundation
import Logging
import Synchronization
import TestScheduling
import Testing

@testable import EventHTTPServer

/// An operator can see each refused request: at debug, one line with its request id, route, status and
/// code, and nothing of its credentials.
@Suite("Refused requests are logged at debug with a request id", .serialized, .hangGuard)
struct RefusedRequestLogTests {
  @Test("a 401, a 400 and a 429 each log one line with an id at debug; none at info; no key in any line")
  func refusalsLogged() async throws {
    try await checkLogged(at: .debug, expectLines: true)
    try await checkLogged(at: .info, expectLines: false)
  }

  private func checkLogged(at level: Logger.Level, expectLines: Bool) async throws {
    let handler = KeepingLogHandler()
    var logger = Logger(label: "refusals-test") { _ in handler }
    logger.logLevel = level
    var configuration = EventHTTPServerConfiguration(keys: try APIKeys(["alice": "alice-secret-key"]))
    configuration.port = 0
    configuration.adminPort = 0
    configuration.snapshotInterval = nil
    configuration.rateLimit = RateLimiter.Policy(burst: 2, perSecond: 0.001)
    let server = EventHTTPServer(
      application: KanbanServer(team: ["alice"]),
      configuration: configuration,
      logger: logger
    )
    let started = try await RunningWithAdmin.start(server)
    let http = RawHTTP(base: URL(string: "http://127.0.0.1:\(started.port)")!)

    let wrongKey = try await http.send("POST", "api/v1/register", as: "alice", key: "not-alice-key-at-all")
    #expect(wrongKey.status == 401)
    let badQuery = try await http.send(
      "GET",
      "api/v1/events",
      query: ["queue_id": "q", "last_event_id": "not-a-number"],
      as: "alice",
      key: "alice-secret-key"
    )
    #expect(badQuery.status == 400)
    var statuses: [Int] = []
    for _ in 0..<4 {
      statuses.append(try await http.send("POST", "api/v1/register", as: "alice", key: "alice-secret-key").status)
    }
    #expect(statuses.contains(429), "\(statuses)")

    await server.shutdown()
    try await started.running.value
    let lines = handler.kept.lines.withLock { $0 }
    let refused = lines.filter { $0.message == "request refused" }
    if expectLines {
      let byStatus = Dictionary(grouping: refused) { $0.metadata["status"] ?? "" }
      #expect(byStatus["401"]?.count == 1, "\(refused)")
      #expect(byStatus["400"]?.count == 1, "\(refused)")
      #expect(byStatus["429"]?.count == statuses.filter { $0 == 429 }.count, "\(refused)")
      #expect(byStatus["400"]?.first?.metadata["route"] == "/api/v1/events")
      for line in refused {
        #expect(line.level == .debug)
        #expect(line.metadata["hb.request.id"]?.isEmpty == false, "\(line)")
        #expect(line.metadata["code"] != nil)
      }
      #expect(Set(refused.compactMap { $0.metadata["hb.request.id"] }).count == refused.count, "one id per request")
    } else {
      #expect(refused.isEmpty, "\(refused)")
    }
    for line in lines {
      let text = line.message + line.metadata.values.joined()
      #expect(!text.contains("alice-secret-key") && !text.contains("not-alice-key-at-all"), "\(line)")
    }
  }
}
