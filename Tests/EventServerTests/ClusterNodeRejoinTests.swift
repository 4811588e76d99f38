import EventProtocol
import Foundation
import SampleApps
import TestScheduling
import Testing
import UpdateMachineTesting

@testable import EventServer

@Suite(
  "A cluster node whose turn's outcome it cannot learn rebuilds itself from the log and serves again",
  .hangGuard
)
struct ClusterNodeRejoinTests {
  typealias Node = NoteNode

  func join(_ log: InMemorySharedLog, clock: ManualClock, seed: UInt64) async throws -> Node {
    try await joinNode(log, clock: clock, seed: seed)
  }

  /// What two nodes must agree on once both applied the whole log.
  func durableState(of node: Node, through position: UInt64) async -> (NoteBoard, QueueDump<NoteEvent>) {
    await node.waitUntilAppended(through: position)
    let machine = await node.machine
    return (machine.application, machine.dump())
  }

  @Test("a lost commit answer: the node fails what waited, rebuilds from the log, keeps what was committed")
  func lostCommitAnswer() async throws {
    let log = InMemorySharedLog()
    let clock = ManualClock(start: t0)
    let (a, b) = (try await join(log, clock: clock, seed: 1), try await join(log, clock: clock, seed: 2))
    let registration = try await a.register(user: bob)
    let parked = Task { try await a.events(queueID: registration.queueID, user: bob, lastEventID: -1) }
    await a.waitForParkedPolls(count: 1)
    await a.waitBetweenTurns()  // the poll's own turn has committed: the fault below hits the write's

    log.loseNextCommitAnswer()
    await #expect(throws: ServerLogError.self) { try await a.handle(.post("maybe", to: [bob]), from: alice) }
    await #expect(throws: ServerLogError.self) { try await parked.value }
    #expect(await a.logFailure == nil, "a lost answer is not a failed log: the node does not stop")
    #expect(await a.isRejoiningLog)
    await #expect(throws: ServerLogError.self) { try await a.register(user: bob) }
    clock.advance(by: .milliseconds(500))
    let lag = await a.replicationLag
    // The write's turn recorded the parked poll's acknowledgement before it (acknowledgements are written
    // lazily, ahead of the next input): two records the node has not read again.
    #expect(lag?.records == 2, "the log holds the write the node has not read again")
    #expect((lag?.behindFor ?? .zero) >= .milliseconds(500))

    clock.advance(by: .milliseconds(500))
    await a.waitUntilRejoined()
    #expect(await a.isRejoiningLog == false)
    #expect(await a.logRejoins == 1)
    #expect(await a.replicationLag == ReplicationLag(records: 0, behindFor: .zero))
    #expect(await a.application.notes[bob] == ["maybe"])
    let events = try await a.events(queueID: registration.queueID, user: bob, lastEventID: -1, dontBlock: true)
    #expect(events.map(\.body) == [.payload(.note(text: "maybe"))], "the client keeps its queue")
    try await a.handle(.post("after", to: [bob]), from: alice)
    let last = lastPosition(log)
    let (stateA, stateB) = (await durableState(of: a, through: last), await durableState(of: b, through: last))
    #expect(stateA.0 == stateB.0)
    #expect(stateA.1 == stateB.1)
  }

  @Test("a commit that failed after the node decided: what it decided is dropped, never served")
  func failedCommit() async throws {
    let log = InMemorySharedLog()
    let clock = ManualClock(start: t0)
    let (a, b) = (try await join(log, clock: clock, seed: 1), try await join(log, clock: clock, seed: 2))
    let registration = try await a.register(user: bob)
    log.failNextCommit()
    await #expect(throws: ServerLogError.self) { try await a.handle(.post("never", to: [bob]), from: alice) }
    #expect(await a.isRejoiningLog)
    clock.advance(by: .seconds(1))
    await a.waitUntilRejoined()
    #expect(await a.application.notes[bob] == nil, "the node's state was ahead of the log: it is dropped")
    try await a.handle(.post("kept", to: [bob]), from: alice)
    let events = try await a.events(queueID: registration.queueID, user: bob, lastEventID: -1, dontBlock: true)
    #expect(events.map(\.body) == [.payload(.note(text: "kept"))])
    // The poll's acknowledgement is written ahead of the node's next input.
    try await a.handle(.post("after", to: [carol]), from: alice)
    let last = lastPosition(log)
    let (stateA, stateB) = (await durableState(of: a, through: last), await durableState(of: b, through: last))
    #expect(stateA.0 == stateB.0)
    #expect(stateA.1 == stateB.1)
  }

  @Test("a single server has no replication lag and never rejoins")
  func singleServer() async throws {
    let server = EventServer(application: NoteBoard(), clock: ManualClock(start: t0), anchor: t0)
    #expect(await server.replicationLag == nil)
    #expect(await server.logRejoins == 0)
    #expect(await server.isRejoiningLog == false)
  }
}
