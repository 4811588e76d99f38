// The examples of docs/testing.md, compiled and run here; the guide shows the lines between the markers.
import EventProtocol
import EventServer
import Foundation
import TestScheduling
import Testing
import UpdateMachine
import UpdateMachineTesting

// GUIDE-BEGIN reducer
@Test("a greeting event appends its text; a pending greeting shows until confirmed")
func greetingsReducerRules() throws {
  let reducer = GreetingsReducer()
  var state = Greetings(all: ["hi"])
  try reducer.apply(Greeting(text: "hello"), to: &state)
  #expect(state == Greetings(all: ["hi", "hello"]))

  var shown = state
  reducer.applyOptimistically("typing…", to: &shown)
  #expect(shown == Greetings(all: ["hi", "hello", "typing…"]))
}

@Test(
  "every device converges after random faults, crashes and server restarts",
  .cpuBound,
  arguments: 0..<200 as Range<UInt64>
)
func greetingsConverge(seed: UInt64) {
  var world = LoopbackWorld(
    application: GreetingBoard(),
    reducer: { _ in GreetingsReducer() },
    devices: ["alice", "bob"],
    seed: seed
  )
  for step in 0..<150 {
    if step % 15 == 0 { world.submit("greeting \(step)", on: step % 2) }
    world.chaoticStep()
  }
  let settled = world.runUntilSettled(maximumSteps: 3_000)
  #expect(settled, "seed \(seed):\n\(world.trace.suffix(30).joined(separator: "\n"))")
}
// GUIDE-END reducer

// GUIDE-BEGIN network
@Test("a greeting written offline is sent once the network is back", .hangGuard)
func greetingsSurviveAFlakyNetwork() async throws {
  let clock = ManualClock()
  let server = EventServer(application: GreetingBoard(), clock: clock, anchor: clock.now)
  let network = FaultInjectingTransport(
    InProcessTransport(server: server, user: "alice"),
    plan: FaultPlan(seed: 7),
    clock: clock
  )
  let machine = UpdateMachine(
    reducer: GreetingsReducer(),
    transport: network,
    store: InMemoryStore(),
    clock: clock,
    anchor: clock.now
  )
  network.partitioned = true  // no network at all
  await machine.start()
  _ = await machine.submit("sent while offline")
  for await snapshot in await machine.snapshots() where snapshot.metrics.failures > 0 {
    #expect(snapshot.state == Greetings(all: ["sent while offline"]))  // shown at once…
    #expect(snapshot.pendingMutations.count == 1)  // …but not confirmed
    break
  }

  network.partitioned = false
  await machine.networkBecameAvailable()  // what the app's path monitor says
  for await snapshot in await machine.snapshots()
  where snapshot.pendingMutations.isEmpty && snapshot.freshness.freshness == .live {
    break
  }
  #expect(await server.application.greetings == Greetings(all: ["sent while offline"]))
  await machine.stop()
}
// GUIDE-END network

@Test("docs/testing.md shows exactly the examples compiled here", arguments: ["reducer", "network"])
func testingGuideMatches(example: String) throws {
  let source = try String(contentsOfFile: #filePath, encoding: .utf8)
  let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
  let guide = try String(contentsOf: root.appendingPathComponent("docs/testing.md"), encoding: .utf8)
  let begin = try #require(source.range(of: "// GUIDE-BEGIN \(example)\n"))
  let end = try #require(source.range(of: "// GUIDE-END \(example)"))
  #expect(guide.contains(source[begin.upperBound..<end.lowerBound]))
}
