import EventProtocol
import EventServer
import Foundation
import TestScheduling
import Testing
import UpdateMachine

@Suite("Documentation: the partial-state example", .hangGuard)
struct PartialStateDocumentationTests {
  @Test("the help desk example runs: a fetched narrow, then a new ticket arrives live in it")
  func exampleRuns() async throws {
    let server = EventServer(
      application: HelpDeskServer(tickets: [
        Ticket(number: 1, team: "billing", title: "refund", isOpen: true),
        Ticket(number: 2, team: "sales", title: "quote", isOpen: true),
      ])
    )
    let machine = UpdateMachine(
      reducer: HelpDeskReducer(),
      transport: InProcessTransport(server: server, user: "ana", throughWire: true),
      store: InMemoryStore(),
      configuration: helpDeskConfiguration()
    )
    await machine.start()
    #expect(await showBilling(machine).map(\.title) == ["refund"])
    try await server.handle("invoice", from: "ana")
    let live = await machine.firstSnapshot {
      ($0.state?.tickets.list(Narrow([NarrowTerm("team", "billing")])).items.count ?? 0) == 2
    }
    #expect(live?.state?.openTickets == 3)
    #expect(live?.state?.tickets.item(2) == .unknown, "a sales ticket was never fetched")
    await machine.stop()
  }

  @Test("docs/partial-state.md shows exactly the example this target compiles")
  func documentMatches() throws {
    let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let source = try String(contentsOf: folder.appendingPathComponent("PartialStateExample.swift"), encoding: .utf8)
    let root = folder.deletingLastPathComponent().deletingLastPathComponent()
    let text = try String(contentsOf: root.appendingPathComponent("docs/partial-state.md"), encoding: .utf8)
    let begin = try #require(source.range(of: "// PARTIAL-EXAMPLE-BEGIN\n"))
    let end = try #require(source.range(of: "// PARTIAL-EXAMPLE-END"))
    #expect(text.contains(source[begin.upperBound..<end.lowerBound]))
  }
}
