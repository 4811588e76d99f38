import EventProtocol
import EventServer
import Foundation
import Logging
import Synchronization
import TestScheduling
import Testing

@testable import EventHTTPServer

/// A backend writes on a user's behalf with a service key: applied as the user's write, once per mutation
/// id across a restart, under its own client id that no user may take, each logged with the service's name;
/// service keys and users' keys each open only their own routes.
@Suite("A service identity writes on users' behalf", .serialized, .hangGuard)
struct ServiceWritesTests {
  private static let serviceKey = "billing-service-key"

  private func start(
    dataDirectory: URL,
    handler: KeepingLogHandler
  ) async throws -> (EventHTTPServer<KanbanServer>, RunningWithAdmin) {
    var logger = Logger(label: "service-writes-test") { _ in handler }
    logger.logLevel = .info
    var configuration = EventHTTPServerConfiguration(
      keys: try APIKeys(["alice": "alice-secret-key", "bob": "bob-secret-key"])
    )
    configuration.serviceKeys = try APIKeys(["billing": Self.serviceKey])
    configuration.port = 0
    configuration.adminPort = 0
    configuration.dataDirectory = dataDirectory
    let server = EventHTTPServer(
      application: KanbanServer(team: ["alice", "bob"]),
      configuration: configuration,
      logger: logger
    )
    return (server, try await RunningWithAdmin.start(server))
  }

  private func batch(clientID: String, mutationID: Int, card: String) -> Data {
    Data(
      #"{"mutations":[{"client_id":"\#(clientID)","mutation_id":\#(mutationID),"mutation":{"card":"\#(card)","column":"done"}}]}"#
        .utf8
    )
  }

  /// `body` posted to the service route for `user` (none: no user named) with the key of `service`.
  private func serviceWrite(
    _ http: RawHTTP,
    for user: String?,
    as service: UserID = "billing",
    key: String = serviceKey,
    body: Data
  ) async throws -> RawHTTP.Answer {
    try await http.send(
      "POST",
      "api/v1/service/mutation_batches",
      query: user.map { ["user": $0] } ?? [:],
      as: service,
      key: key,
      body: body,
      contentType: "application/json"
    )
  }

  private func applied(_ answer: RawHTTP.Answer) -> Bool? {
    let object = try? JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
    let outcomes = object?["outcomes"] as? [[String: Any]]
    return outcomes?.first?["applied"] as? Bool
  }

  @Test("a service's own write (a publish) reaches the users the application delivers to, once per publish id")
  func publish() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("service-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let handler = KeepingLogHandler()
    let (server, started) = try await start(dataDirectory: directory, handler: handler)
    let http = RawHTTP(base: URL(string: "http://127.0.0.1:\(started.port)")!)
    var queues: [UserID: String] = [:]
    for (user, key) in [("alice", "alice-secret-key"), ("bob", "bob-secret-key")] {
      let registered = try await http.send("POST", "api/v1/register", as: UserID(user), key: key)
      queues[UserID(user)] = try #require(
        (try JSONSerialization.jsonObject(with: registered.body) as? [String: Any])?["queue_id"] as? String
      )
    }
    let publish = batch(clientID: "service:billing", mutationID: 1, card: "release-notes")
    let first = try await serviceWrite(http, for: nil, body: publish)
    #expect(first.status == 200 && applied(first) == true, "\(first.text)")
    let again = try await serviceWrite(http, for: nil, body: publish)
    #expect(again.status == 200 && applied(again) == false, "\(again.text)")
    for (user, key) in [("alice", "alice-secret-key"), ("bob", "bob-secret-key")] {
      let events = try await http.send(
        "GET",
        "api/v1/events",
        query: ["queue_id": queues[UserID(user)] ?? "", "last_event_id": "-1", "dont_block": "true"],
        as: UserID(user),
        key: key
      )
      let count = events.text.components(separatedBy: #""card":"release-notes""#).count - 1
      #expect(count == 1, "\(user)'s queue holds the publish once: \(events.text)")
    }
    // No user can be the service's own identity, whatever the authenticator says.
    let gate = RequestGate(authenticator: Always(user: "service:billing"), policy: .init()) { Timestamp(Date()) }
    await #expect(throws: EventAPIError.self) { _ = try await gate.admit(authorization: "Bearer x") }
    await server.shutdown()
    try await started.running.value
    let audit = handler.kept.lines.withLock { $0 }.filter { $0.message == "service wrote on a user's behalf" }
    #expect(audit.map { $0.metadata["user"] } == ["service:billing", "service:billing"], "\(audit)")
  }

  /// An authenticator vouching for one user, whatever the request sends.
  private struct Always: Authenticator {
    let user: UserID
    func user(authorization: String?) async -> UserID? { user }
  }

  @Test("applied as the user's, once across a restart; reserved client ids and each key's other routes refused")
  func writesOnBehalf() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("service-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let handler = KeepingLogHandler()
    var (server, started) = try await start(dataDirectory: directory, handler: handler)
    var http = RawHTTP(base: URL(string: "http://127.0.0.1:\(started.port)")!)

    let alice = try await http.send("POST", "api/v1/register", as: "alice", key: "alice-secret-key")
    let queue = try #require(
      (try JSONSerialization.jsonObject(with: alice.body) as? [String: Any])?["queue_id"] as? String
    )
    let write = batch(clientID: "service:billing", mutationID: 7, card: "invoice")
    let first = try await serviceWrite(http, for: "alice", body: write)
    #expect(first.status == 200 && applied(first) == true, "\(first.text)")
    let events = try await http.send(
      "GET",
      "api/v1/events",
      query: ["queue_id": queue, "last_event_id": "-1", "dont_block": "true"],
      as: "alice",
      key: "alice-secret-key"
    )
    #expect(events.text.contains(#""card":"invoice""#), "alice's queue has the service's write: \(events.text)")

    // Refused: another client id, a user's key on the service route, the service key on a user's route, a
    // user's client taking the reserved id, no user named.
    let otherID = try await serviceWrite(http, for: "alice", body: batch(clientID: "phone", mutationID: 8, card: "x"))
    #expect(otherID.status == 400, "\(otherID.text)")
    let userOnService = try await serviceWrite(http, for: "bob", as: "alice", key: "alice-secret-key", body: write)
    #expect(userOnService.status == 401, "\(userOnService.text)")
    let serviceOnUser = try await http.send("POST", "api/v1/register", as: "billing", key: Self.serviceKey)
    #expect(serviceOnUser.status == 401, "\(serviceOnUser.text)")
    let forged = try await http.send(
      "POST",
      "api/v1/mutation_batches",
      as: "alice",
      key: "alice-secret-key",
      body: batch(clientID: "service:billing", mutationID: 9, card: "forged"),
      contentType: "application/json"
    )
    #expect(forged.status == 400 && forged.text.contains("reserved"), "\(forged.text)")
    let asService = try await serviceWrite(http, for: "service:billing", body: write)
    #expect(asService.status == 400, "\(asService.text)")

    // The same write after a restart: remembered (durable before it was answered), not applied again.
    await server.shutdown()
    try await started.running.value
    (server, started) = try await start(dataDirectory: directory, handler: handler)
    http = RawHTTP(base: URL(string: "http://127.0.0.1:\(started.port)")!)
    let again = try await serviceWrite(http, for: "alice", body: write)
    #expect(again.status == 200 && applied(again) == false, "\(again.text)")
    await server.shutdown()
    try await started.running.value

    let audit = handler.kept.lines.withLock { $0 }.filter { $0.message == "service wrote on a user's behalf" }
    #expect(audit.count == 2, "\(audit)")
    #expect(audit.allSatisfy { $0.metadata["service"] == "billing" && $0.metadata["user"] == "alice" }, "\(audit)")
    #expect(audit.first?.metadata["mutation_ids"] == "7...7")
  }
}
