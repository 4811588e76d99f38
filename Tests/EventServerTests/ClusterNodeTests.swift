import EventProtocol
import Foundation
import SampleApps
import TestScheduling
import Testing
import UpdateMachineTesting

@testable import EventServer

@Suite(
  "Cluster nodes on one shared log: any node answers any queue; a node's death loses nothing",
  .hangGuard
)
struct ClusterNodeTests {
  typealias Node = NoteNode

  func join(_ log: InMemorySharedLog, clock: ManualClock, seed: UInt64) async throws -> Node {
    try await joinNode(log, clock: clock, seed: seed)
  }

  /// The node's whole durable state (what a snapshot holds), once it applied everything the log holds.
  struct DurableState: Equatable {
    var application: NoteBoard
    var queues: QueueDump<NoteEvent>
    var mutations: MutationMemory
    var nextSweepAt: Timestamp
  }

  func state(of node: Node, through position: UInt64) async -> DurableState {
    await node.waitUntilAppended(through: position)
    let machine = await node.machine
    return DurableState(
      application: machine.application,
      queues: machine.dump(),
      mutations: machine.mutationMemory,
      nextSweepAt: machine.nextSweepAt
    )
  }

  @Test("a queue registered on one node is polled on another, with writes from a third")
  func anyNodeAnswersAnyQueue() async throws {
    let log = InMemorySharedLog()
    let clock = ManualClock(start: t0)
    let (a, b, c) = (
      try await join(log, clock: clock, seed: 1), try await join(log, clock: clock, seed: 2),
      try await join(log, clock: clock, seed: 3)
    )
    let registration = try await a.register(user: bob)
    _ = try await c.applyMutation(
      .post("hi", to: [bob]),
      from: alice,
      clientID: "phone",
      mutationID: MutationID(rawValue: 1)
    )
    // B's poll is decided in B's turn, after B applied everything committed before it: no waiting needed.
    let events = try await b.events(queueID: registration.queueID, user: bob, lastEventID: -1, dontBlock: true)
    #expect(events.map(\.body) == [.payload(.note(text: "hi"))])
    #expect(events.map(\.id) == [0])
    // The log holds what every node applies, in one order: the registration, the mutation, the poll.
    #expect(log.stored.records.map(\.position) == Array(1...lastPosition(log)))
  }

  @Test("a poll parked on one node is woken by a write on another")
  func parkedPollWokenByAnotherNode() async throws {
    let log = InMemorySharedLog()
    let clock = ManualClock(start: t0)
    let (a, b) = (try await join(log, clock: clock, seed: 1), try await join(log, clock: clock, seed: 2))
    let registration = try await a.register(user: bob)
    let poll = Task { try await a.events(queueID: registration.queueID, user: bob, lastEventID: -1) }
    await a.waitForParkedPolls(count: 1)
    try await b.handle(.post("from b", to: [bob]), from: alice)
    #expect(try await poll.value.map(\.body) == [.payload(.note(text: "from b"))])
  }

  @Test("a client whose node died goes on with the same queue and finger on another, without a gap or a restart event")
  func nodeDiesClientContinues() async throws {
    let log = InMemorySharedLog()
    let clock = ManualClock(start: t0)
    var a: Node? = try await join(log, clock: clock, seed: 1)
    let registration = try await a!.register(user: bob)
    try await a!.handle(.post("one", to: [bob]), from: alice)
    let first = try await a!.events(queueID: registration.queueID, user: bob, lastEventID: -1, dontBlock: true)
    await a!.shutdown()
    a = nil
    let b = try await join(log, clock: clock, seed: 2)
    try await b.handle(.post("two", to: [bob]), from: alice)
    let next = try await b.events(
      queueID: registration.queueID,
      user: bob,
      lastEventID: first.last!.id,
      dontBlock: true
    )
    #expect(first.map(\.id) == [0])
    #expect(next.map(\.id) == [1])
    #expect(next.map(\.body) == [.payload(.note(text: "two"))])
    // A node started again on the log is a replica, not a recovery: no ids skipped, nothing recorded for it.
    let c = try await join(log, clock: clock, seed: 3)
    #expect(await c.queue(registration.queueID)?.nextEventID == 2)
  }

  @Test(
    "nodes writing at once end with the same state and a log without gaps; a node rebuilt from the log agrees",
    arguments: [1, 2, 3] as [UInt64]
  )
  func concurrentWritesAgree(seed: UInt64) async throws {
    let log = InMemorySharedLog()
    let clock = ManualClock(start: t0)
    var joined: [Node] = []
    for index in 0..<3 { joined.append(try await join(log, clock: clock, seed: seed * 10 + UInt64(index))) }
    let nodes = joined
    let users: [UserID] = [alice, bob, "carol"]
    var registered: [Registration<NoteSnapshot>] = []
    for (index, user) in users.enumerated() { registered.append(try await nodes[index].register(user: user)) }
    let registrations = registered
    try await withThrowingTaskGroup(of: Void.self) { group in
      for (index, node) in nodes.enumerated() {
        group.addTask {
          var random = SeededRandomNumberGenerator(seed: seed + UInt64(index))
          for number in 1...20 {
            let recipient = users[Int.random(in: 0..<users.count, using: &random)]
            _ = try await node.applyMutation(
              .post("n\(index)-\(number)", to: [recipient]),
              from: users[index],
              clientID: ClientID(rawValue: "c\(index)"),
              mutationID: MutationID(rawValue: UInt64(number))
            )
          }
        }
      }
      // A poll that prunes, on a node other than the one that registered it, in the middle of the writes.
      group.addTask {
        _ = try await nodes[1].events(queueID: registrations[0].queueID, user: alice, lastEventID: -1, dontBlock: true)
      }
      try await group.waitForAll()
    }
    let last = lastPosition(log)
    #expect(log.stored.records.map(\.position) == Array(1...last))
    let states = await nodes.asyncMap { await state(of: $0, through: last) }
    #expect(states[0] == states[1])
    #expect(states[1] == states[2])
    // And a node rebuilt from the log alone holds the same.
    let rebuilt = try await join(log, clock: clock, seed: 99)
    #expect(await state(of: rebuilt, through: last) == states[0])
    #expect(await nodes[0].application.notes.values.map(\.count).reduce(0, +) == 60)
  }

  @Test("a database that cannot be reached fails requests at once, changes nothing, and the node carries on after")
  func unreachableLogFailsFast() async throws {
    let log = InMemorySharedLog()
    let clock = ManualClock(start: t0)
    let node = try await join(log, clock: clock, seed: 1)
    log.failEveryCall(with: .storage("the database is down"))
    await #expect(throws: ServerLogError.self) { try await node.register(user: bob) }
    let turns = log.turnCount
    await #expect(throws: ServerLogError.self) { try await node.handle(.post("x", to: [bob]), from: alice) }
    #expect(log.turnCount == turns, "failing fast: no second turn within a second of the failure")
    #expect(await node.logFailure == nil)
    log.failEveryCall(with: nil)
    clock.advance(by: .seconds(2))
    let registration = try await node.register(user: bob)
    #expect(await node.queue(registration.queueID) != nil)
    #expect(await node.application.notes.isEmpty)
  }

  @Test("a heartbeat due on one node is a decision in the log: every node's queue holds it")
  func heartbeatIsReplicated() async throws {
    let log = InMemorySharedLog()
    let clock = ManualClock(start: t0)
    let (a, b) = (try await join(log, clock: clock, seed: 1), try await join(log, clock: clock, seed: 2))
    let registration = try await a.register(user: bob)
    let poll = Task { try await a.events(queueID: registration.queueID, user: bob, lastEventID: -1) }
    await a.waitForParkedPolls(count: 1)
    clock.advance(by: .seconds(60))
    #expect(try await poll.value.map(\.body) == [.heartbeat])
    await b.waitUntilAppended(through: lastPosition(log))
    #expect(await b.queue(registration.queueID)?.nextEventID == 1)
  }
}

@Suite("docs/scaling.md's example compiles and does what it says")
struct ScalingDocumentationTests {
  @Test("two nodes on one log: a note written on B is polled on A")
  func scalingExample() async throws {
    // docs/scaling.md
    let log = InMemorySharedLog()  // PostgresServerLog in production
    let (nodeA, _) = try await EventServer.joining(log, application: NoteBoard(), clock: ContinuousClock())
    let (nodeB, _) = try await EventServer.joining(log, application: NoteBoard(), clock: ContinuousClock())
    let registration = try await nodeA.register(user: "alice")
    try await nodeB.handle(.post("hi", to: ["alice"]), from: "bob")
    let events = try await nodeA.events(
      queueID: registration.queueID,
      user: "alice",
      lastEventID: -1,
      dontBlock: true
    )
    // end of the example
    #expect(events.map(\.body) == [.payload(.note(text: "hi"))])
    // The page shows these lines (the last one on one line there).
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    let page = try String(contentsOf: root.appendingPathComponent("docs/scaling.md"), encoding: .utf8)
    for line in [
      "let log = InMemorySharedLog()  // PostgresServerLog in production",
      "let (nodeB, _) = try await EventServer.joining(log, application: NoteBoard(), clock: ContinuousClock())",
      "try await nodeB.handle(.post(\"hi\", to: [\"alice\"]), from: \"bob\")",
      "let events = try await nodeA.events(queueID: registration.queueID, user: \"alice\", lastEventID: -1, dontBlock: true)",
    ] {
      #expect(page.contains(line), "docs/scaling.md lacks: \(line)")
    }
  }
}

extension Array where Element: Sendable {
  /// Maps in order, awaiting each.
  func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
    var results: [T] = []
    for element in self { results.append(try await transform(element)) }
    return results
  }
}
