import EventProtocol
import EventServer
import Foundation
import TestScheduling
import Testing
import UpdateMachine

@Suite("Documentation examples", .hangGuard)
struct DocumentationExampleTests {
  @Test("the embedding example runs: the write is applied once and confirmed by its event")
  func exampleRuns() async throws {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("greetings-\(UUID()).json")
    defer { try? FileManager.default.removeItem(at: url) }
    #expect(await runGreetingsApp(storeURL: url) == Greetings(all: ["hello from alice"]))
    // The record file and its journal, replayed, hold the confirmed write.
    let record = try #require(try PersistedRecord.load(from: FileStore(url: url), for: GreetingsReducer()))
    #expect(record.state == Greetings(all: ["hello from alice"]) && record.outbox.isEmpty)
    try? FileManager.default.removeItem(at: url.appendingPathExtension("journal"))
  }

  @Test(
    "README.md and docs/embedding.md show exactly the example this file compiles",
    arguments: ["README.md", "docs/embedding.md"]
  )
  func documentsMatch(document: String) throws {
    let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let source = try String(contentsOf: folder.appendingPathComponent("DocumentationExample.swift"), encoding: .utf8)
    let root = folder.deletingLastPathComponent().deletingLastPathComponent()
    let text = try String(contentsOf: root.appendingPathComponent(document), encoding: .utf8)
    let begin = try #require(source.range(of: "// EXAMPLE-BEGIN\n"))
    let end = try #require(source.range(of: "// EXAMPLE-END"))
    #expect(text.contains(source[begin.upperBound..<end.lowerBound]))
  }
}

@Suite("Documentation: the networked example", .hangGuard)
struct NetworkExampleTests {
  @Test("the README's networked example compiles, and with no server it reports connection failures, no crash")
  func networkedExample() async throws {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("net-greetings-\(UUID()).json")
    defer { try? FileManager.default.removeItem(at: url) }
    let machine = makeNetworkedApp(
      server: URL(string: "http://127.0.0.1:\(try CannedHTTPServer.closedPort())")!,
      apiKey: "k",
      storeURL: url
    )
    await machine.start()
    for await snapshot in await machine.snapshots() where snapshot.metrics.failures > 0 { break }
    await machine.stop()

    let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let source = try String(contentsOf: folder.appendingPathComponent("NetworkExample.swift"), encoding: .utf8)
    let readme = try String(
      contentsOf: folder.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("README.md"),
      encoding: .utf8
    )
    let begin = try #require(source.range(of: "// NETWORK-EXAMPLE-BEGIN\n"))
    let end = try #require(source.range(of: "// NETWORK-EXAMPLE-END"))
    #expect(readme.contains(source[begin.upperBound..<end.lowerBound]))
  }

  @Test("docs/embedding.md's example of refreshed tokens is the code this target compiles")
  func tokenExample() throws {
    let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let source = try String(contentsOf: folder.appendingPathComponent("NetworkExample.swift"), encoding: .utf8)
    let embedding = try String(
      contentsOf: folder.deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/embedding.md"),
      encoding: .utf8
    )
    let begin = try #require(source.range(of: "// TOKEN-EXAMPLE-BEGIN\n"))
    let end = try #require(source.range(of: "// TOKEN-EXAMPLE-END"))
    #expect(embedding.contains(source[begin.upperBound..<end.lowerBound]))
  }
}
