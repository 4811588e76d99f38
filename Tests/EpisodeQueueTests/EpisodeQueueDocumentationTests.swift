import EpisodeQueue
import EventProtocol
import EventServer
import Foundation
import Testing
import UpdateMachine

@Suite("docs/episode-queue.md")
struct EpisodeQueueDocumentationTests {
  @Test("the page's example is this code, which compiles and starts a machine")
  func exampleCompiles() async throws {
    // DOC-BEGIN
    // Server side: the application, served by EventServer (or Server/'s HTTP server).
    let server = EventServer(application: EpisodeServer(admins: ["kpcc"]))
    // Client side: the engine mirrors the server's projection of the listener.
    let machine = UpdateMachine(
      reducer: EpisodeReducer(),
      transport: InProcessTransport(server: server, user: "ann"),
      store: InMemoryStore()
    )
    // Per device, never synced: which files to fetch, cancel and delete.
    let downloads = EpisodeDownloads(keep: 10)
    // DOC-END
    await machine.start()
    for await snapshot in await machine.snapshots() where snapshot.confirmedState != nil { break }
    await machine.stop()
    #expect(downloads.files.isEmpty)

    let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
    let begin = try #require(source.range(of: "// DOC-BEGIN\n"))
    let end = try #require(source.range(of: "    // DOC-END"))
    let code = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
      .map { $0.dropFirst(4) }.joined(separator: "\n")
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    let page = try String(contentsOf: root.appendingPathComponent("docs/episode-queue.md"), encoding: .utf8)
    #expect(page.contains(code))
  }
}
