import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import SQLiteNIO
import TestScheduling
import Testing
import UpdateMachine

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

@Suite("docs/serving.md: a stored application over HTTP, end to end", .serialized, .hangGuard)
struct ServingStoredExampleTests {
  typealias KanbanTransport = URLSessionTransport<Board, CardMoved, CardMoved>

  /// Starts the example on `directory`; returns the server, its task and its URL.
  static func start(
    _ directory: URL
  ) async throws -> (EventHTTPServer<StoredRelay<StoredKanban>>, Task<Void, any Error>, URL) {
    let server = try makeStoredKanbanServer(port: 0, dataDirectory: directory)
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let running = Task { try await server.run(handleSignals: false) { continuation.yield($0) } }
    var iterator = ports.makeAsyncIterator()
    let port = try #require(await iterator.next())
    return (server, running, URL(string: "http://127.0.0.1:\(port)")!)
  }

  @Test("two clients see each other's moves, the cards are rows, and a restart keeps every queue")
  func storedExampleServes() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stored-kanban-\(UUID())")
    defer { try? FileManager.default.removeItem(at: directory) }
    var (server, running, url) = try await Self.start(directory)
    let store = InMemoryStore()
    let machine = { (url: URL, user: UserID, key: String, store: InMemoryStore) in
      UpdateMachine(
        reducer: KanbanReducer(),
        transport: KanbanTransport(baseURL: url, credentials: .init(user: user, apiKey: key)),
        store: store
      )
    }
    let alice = machine(url, "alice", "alice-secret-key", InMemoryStore())
    var bob = machine(url, "bob", "bob-secret-key", store)
    await alice.start()
    await bob.start()
    #expect(await alice.waitUntilLive()?.stopReason == nil)
    #expect(await bob.waitUntilLive()?.stopReason == nil)
    _ = await alice.submit(CardMoved(card: "login page", column: "doing"))
    _ = await alice.submit(CardMoved(card: "", column: "done"))
    #expect(await bob.firstSnapshot { $0.confirmedState?.columns["login page"] == "doing" } != nil)
    let refused = await alice.firstSnapshot { !$0.rejectedMutations.isEmpty }
    #expect(refused?.rejectedMutations.first?.reason.contains("name the card") == true)
    await alice.stop()
    await bob.stop()
    await server.shutdown()
    try await running.value

    // The cards are rows of the team's own table, readable with SQLite's tools.
    let database = try await SQLiteConnection.open(
      storage: .file(path: directory.appendingPathComponent("event-server.sqlite").path)
    )
    let rows = try await database.query("SELECT card, lane FROM cards")
    try await database.close()
    #expect(
      rows.map { "\($0.column("card")?.string ?? "")=\($0.column("lane")?.string ?? "")" } == ["login page=doing"]
    )

    // Started again on the same database: bob's saved queue resumes (no new registration) and he sees the
    // move alice makes next.
    (server, running, url) = try await Self.start(directory)
    let alice2 = machine(url, "alice", "alice-secret-key", InMemoryStore())
    bob = machine(url, "bob", "bob-secret-key", store)
    await alice2.start()
    await bob.start()
    #expect(await alice2.waitUntilLive()?.stopReason == nil)
    _ = await alice2.submit(CardMoved(card: "login page", column: "done"))
    let after = await bob.firstSnapshot { $0.confirmedState?.columns["login page"] == "done" }
    #expect(after != nil)
    #expect(after?.metrics.registers == 0, "bob kept the queue he registered before the restart")
    await alice2.stop()
    await bob.stop()
    await server.shutdown()
    try await running.value
  }

  @Test("docs/serving.md shows exactly the stored example this package compiles")
  func documentMatches() throws {
    let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let source = try String(contentsOf: folder.appendingPathComponent("ServingStoredExample.swift"), encoding: .utf8)
    let root = folder.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let text = try String(contentsOf: root.appendingPathComponent("docs/serving.md"), encoding: .utf8)
    let begin = try #require(source.range(of: "// STORED-BEGIN\n"))
    let end = try #require(source.range(of: "// STORED-END"))
    #expect(text.contains(source[begin.upperBound..<end.lowerBound]))
  }
}
