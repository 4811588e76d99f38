import EventHTTPServer
import EventProtocol
import Foundation
import TestScheduling
import Testing
import UpdateMachine

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

@Suite("docs/serving.md: a custom domain over HTTP", .serialized, .hangGuard)
struct ServingExampleTests {
  @Test("the example serves: two clients on URLSessionTransport see each other's moves; a bad move is refused")
  func exampleServes() async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kanban-\(UUID())")
    defer { try? FileManager.default.removeItem(at: directory) }
    let server = try makeKanbanServer(port: 0, dataDirectory: directory)
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let running = Task { try await server.run(handleSignals: false) { continuation.yield($0) } }
    var iterator = ports.makeAsyncIterator()
    let port = try #require(await iterator.next())
    let url = URL(string: "http://127.0.0.1:\(port)")!
    typealias KanbanTransport = URLSessionTransport<Board, CardMoved, CardMoved>
    let machine = { (user: UserID, key: String) in
      UpdateMachine(
        reducer: KanbanReducer(),
        transport: KanbanTransport(baseURL: url, credentials: .init(user: user, apiKey: key)),
        store: InMemoryStore()
      )
    }
    let alice = machine("alice", "alice-secret-key")
    let bob = machine("bob", "bob-secret-key")
    await alice.start()
    await bob.start()
    #expect(await alice.waitUntilLive()?.stopReason == nil)
    #expect(await bob.waitUntilLive()?.stopReason == nil)
    _ = await alice.submit(CardMoved(card: "login page", column: "doing"))
    _ = await alice.submit(CardMoved(card: "", column: "done"))
    let seen = await bob.firstSnapshot { $0.confirmedState?.columns["login page"] == "doing" }
    #expect(seen != nil)
    let refused = await alice.firstSnapshot { !$0.rejectedMutations.isEmpty }
    #expect(refused?.rejectedMutations.first?.reason.contains("name the card") == true)
    await alice.stop()
    await bob.stop()
    await server.shutdown()
    try await running.value
  }

  @Test("docs/serving.md shows exactly the example this package compiles")
  func documentMatches() throws {
    let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let source = try String(contentsOf: folder.appendingPathComponent("ServingExample.swift"), encoding: .utf8)
    let root = folder.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let text = try String(contentsOf: root.appendingPathComponent("docs/serving.md"), encoding: .utf8)
    let begin = try #require(source.range(of: "// EXAMPLE-BEGIN\n"))
    let end = try #require(source.range(of: "// EXAMPLE-END"))
    #expect(text.contains(source[begin.upperBound..<end.lowerBound]))
    let cluster = try String(contentsOf: folder.appendingPathComponent("ServingClusterExample.swift"), encoding: .utf8)
    let clusterBegin = try #require(cluster.range(of: "// CLUSTER-BEGIN\n"))
    let clusterEnd = try #require(cluster.range(of: "// CLUSTER-END"))
    #expect(text.contains(cluster[clusterBegin.upperBound..<clusterEnd.lowerBound]))
  }
}

/// The client side of the example's board.
struct KanbanReducer: UpdateReducer {
  var initialState: Board { Board() }

  func apply(_ event: CardMoved, to state: inout Board) throws(ReducerError) {
    state.columns[event.card] = event.column
  }

  func applyOptimistically(_ move: CardMoved, to state: inout Board) {
    state.columns[move.card] = move.column
  }
}
