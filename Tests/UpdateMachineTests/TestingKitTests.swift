import EventProtocol
import EventServer
import Foundation
import SampleApps
import TestScheduling
import Testing
import UpdateMachine
import UpdateMachineTesting

@Suite("The testing kit: manual clock, fault-injecting transport, loopback world", .hangGuard)
struct TestingKitTests {
  @Test("sleepers wake only when time reaches their deadline; a passed deadline returns at once")
  func clockWakesAtDeadlines() async throws {
    let clock = ManualClock()
    let start = clock.now
    try await clock.sleep(until: start, tolerance: nil)
    let early = Task { try await clock.sleep(until: start.advanced(by: .seconds(1)), tolerance: nil) }
    let late = Task { try await clock.sleep(until: start.advanced(by: .seconds(5)), tolerance: nil) }
    clock.advance(by: .seconds(2))
    try await early.value
    #expect(clock.now == start.advanced(by: .seconds(2)))
    clock.advance(to: start)
    #expect(clock.now == start.advanced(by: .seconds(2)))
    clock.advance(to: start.advanced(by: .seconds(5)))
    try await late.value
  }

  @Test("a cancelled sleeper throws CancellationError, whether it was asleep or not yet")
  func clockCancellation() async {
    let clock = ManualClock()
    let asleep = Task { try await clock.sleep(until: clock.now.advanced(by: .seconds(60)), tolerance: nil) }
    asleep.cancel()
    await #expect(throws: CancellationError.self) { try await asleep.value }
    let cancelledFirst = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await clock.sleep(until: clock.now.advanced(by: .seconds(60)), tolerance: nil)
    }
    await #expect(throws: CancellationError.self) { try await cancelledFirst.value }
  }

  @Test("the in-memory store saves, loads and keeps what it sets aside")
  func inMemoryStore() throws {
    let store = InMemoryStore(data: Data("old".utf8))
    #expect(try store.setAside(reason: "test") == "memory#1")
    #expect(try store.load() == nil)
    try store.save(Data("new".utf8))
    #expect(try store.load() == Data("new".utf8))
    #expect(store.setAsideData == [Data("old".utf8)])
  }

  @Test("waitForSleepers returns once that many sleepers are parked; nextDeadline names the earliest")
  func waitForSleepers() async throws {
    let clock = ManualClock()
    let start = clock.now
    #expect(clock.nextDeadline == nil)
    let first = Task { try await clock.sleep(until: start.advanced(by: .seconds(9)), tolerance: nil) }
    let second = Task { try await clock.sleep(until: start.advanced(by: .seconds(3)), tolerance: nil) }
    await clock.waitForSleepers(count: 2)
    #expect(clock.sleeperCount == 2)
    #expect(clock.nextDeadline == start.advanced(by: .seconds(3)))
    clock.advance(by: .seconds(3))
    try await second.value
    #expect(clock.sleeperCount == 1)
    clock.advance(by: .seconds(6))
    try await first.value
  }

  @Test("the fault-injecting transport replays the same faults for the same seed")
  func faultPlanReplays() async throws {
    func trace(seed: UInt64) async throws -> [String] {
      let clock = ManualClock()
      let server = EventServer(application: NoteBoard(), clock: clock, anchor: clock.now)
      var plan = FaultPlan(seed: seed)
      plan.lostRequestRate = 0.2
      plan.serverErrorRate = 0.2
      plan.rateLimitRate = 0.2
      plan.lostAnswerRate = 0.2
      let transport = FaultInjectingTransport(
        InProcessTransport(server: server, user: "alice"),
        plan: plan,
        clock: clock
      )
      for _ in 0..<40 { _ = try? await transport.register(eventTypes: nil, lifespan: nil, clientID: nil) }
      return transport.trace
    }
    let first = try await trace(seed: 4)
    #expect(first == (try await trace(seed: 4)))
    #expect(first != (try await trace(seed: 5)))
    for fault in ["request lost", "503", "RATE_LIMIT_HIT", "loseAnswer", ": ok"] {
      #expect(first.contains { $0.contains(fault) }, "no \(fault) in \(first)")
    }
  }

  @Test("a partition fails every request; a request that never answers ends only when cancelled; latency sleeps")
  func partitionsHangsAndLatency() async throws {
    let clock = ManualClock()
    let server = EventServer(application: NoteBoard(), clock: clock, anchor: clock.now)
    var plan = FaultPlan(seed: 1)
    plan.latency = .seconds(2) ... .seconds(2)
    let transport = FaultInjectingTransport(InProcessTransport(server: server, user: "alice"), plan: plan, clock: clock)
    transport.partitioned = true
    let partitioned = Task { try await transport.register(eventTypes: nil, lifespan: nil, clientID: nil) }
    await clock.waitForSleepers(count: 1)
    clock.advance(by: .seconds(2))
    await #expect(throws: TransportError.connectionFailed("partitioned")) { _ = try await partitioned.value }
    transport.partitioned = false

    transport.scriptNext(.neverAnswer)
    let hanging = Task { try await transport.register(eventTypes: nil, lifespan: nil, clientID: nil) }
    await clock.waitForSleepers(count: 1)
    clock.advance(by: .seconds(2))
    hanging.cancel()
    await #expect(throws: TransportError.cancelled) { _ = try await hanging.value }

    let fine = Task { try await transport.register(eventTypes: nil, lifespan: nil, clientID: nil) }
    await clock.waitForSleepers(count: 1)
    clock.advance(by: .seconds(2))
    #expect(try await fine.value.lastEventID == -1)
  }

  @Test("the loopback world converges after faults, and the same seed replays the same trace")
  func loopbackWorld() {
    func run(seed: UInt64) -> (Bool, [String]) {
      var world = LoopbackWorld(
        application: NoteBoard(),
        reducer: { NotesReducer(user: $0) },
        devices: ["alice", "alice", "bob"],
        seed: seed
      )
      world.submit(.post("hello", to: ["alice", "bob"]), on: 2)
      for _ in 0..<200 { world.chaoticStep() }
      world.submit(.post("late", to: ["alice"]), on: 0)
      return (world.runUntilSettled(maximumSteps: 2_000), world.trace)
    }
    let (settled, trace) = run(seed: 12)
    #expect(settled)
    #expect(run(seed: 12).1 == trace)
  }
}
