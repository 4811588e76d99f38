import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Logging
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

@Suite("A cluster node's operations: replication lag and rebuilds from the log, in /metrics and /readyz")
struct ClusterOperationsTests {
  @Test("a node reports its lag; a turn whose commit answer is lost is a 503, and the node serves again after")
  func lagAndRejoin() async throws {
    let log = InMemorySharedLog()
    var configuration = EventHTTPServerConfiguration(keys: try APIKeys(["alice": "alice-secret-key"]))
    configuration.port = 0
    configuration.adminPort = 0
    configuration.snapshotInterval = nil
    var logger = Logger(label: "cluster-ops-test")
    logger.logLevel = .critical
    let server = EventHTTPServer(
      application: KanbanServer(team: ["alice"]),
      configuration: configuration,
      logger: logger,
      log: log
    )
    let started = try await RunningWithAdmin.start(server)
    let (port, admin, running) = (started.port, started.admin, started.running)
    let api = RawHTTP(base: URL(string: "http://127.0.0.1:\(port)")!)
    let node = try #require(server.eventServer)

    func move(_ id: Int) async throws -> RawHTTP.Answer {
      let body = #"{"client_id":"c1","mutation_id":\#(id),"mutation":{"card":"c\#(id)","column":"done"}}"#
      return try await api.send(
        "POST",
        "api/v1/mutations",
        as: "alice",
        key: "alice-secret-key",
        body: Data(body.utf8),
        contentType: "application/json"
      )
    }

    #expect(try await move(1).status == 200)
    await node.waitUntilAppended(through: log.announcedPosition)
    let before = try await get(admin.appendingPathComponent("metrics"))
    #expect(before.contains("\nevent_server_replication_lag_records 0"))
    #expect(before.contains("\nevent_server_replication_lag_seconds"))
    #expect(before.contains("\nevent_server_log_rejoins 0"))

    log.loseNextCommitAnswer()
    let lost = try await move(2)
    #expect(lost.status == 503, "the write's outcome is unknown: the client sends it again")
    #expect(lost.headers["retry-after"] != nil)
    await node.waitUntilRejoined()
    #expect(try await move(2).status == 200, "sent again: answered as the repeat it is")
    let after = try await get(admin.appendingPathComponent("metrics"))
    #expect(after.contains("\nevent_server_log_rejoins 1"))
    #expect(await node.application.board.columns["c2"] == "done")
    #expect(try await getStatus(admin.appendingPathComponent("readyz")) == 200)

    // Every cluster series docs/deploying.md names exists here (the others are checked on a single server).
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent().deletingLastPathComponent()
    let guide = try String(contentsOf: root.appendingPathComponent("docs/deploying.md"), encoding: .utf8)
    let named = Set(guide.matches(of: /event_server_(replication|log_rejoins)[a-z_]*/).map { String($0.output.0) })
    #expect(named.count == 3)
    for name in named.sorted() {
      #expect(after.contains("\n\(name)") || after.contains("# TYPE \(name) "), "docs/deploying.md names \(name)")
    }

    await server.shutdown()
    try await running.value
  }

  private func get(_ url: URL) async throws -> String {
    String(decoding: try await URLSession.shared.data(from: url).0, as: UTF8.self)
  }

  private func getStatus(_ url: URL) async throws -> Int {
    let (_, response) = try await URLSession.shared.data(from: url)
    return (response as? HTTPURLResponse)?.statusCode ?? 0
  }
}
