import EventProtocol
import Foundation
import SampleApps
import Synchronization
import TestScheduling
import Testing
import UpdateMachineTesting

@testable import EventServer

/// A log whose writes wait until the test lets them through, so a test can look at the server while a write
/// is under way (no sleeping: it waits for the write to arrive, then acts).
final class HeldServerLog: ServerLog {
  private struct State {
    var holding = false
    var held: [CheckedContinuation<Void, Never>] = []
    var arrivals: [CheckedContinuation<Void, Never>] = []
    var appendCalls = 0
  }

  let inner = InMemoryServerLog()
  private let state = Mutex(State())

  var appendCalls: Int { state.withLock { $0.appendCalls } }

  func hold() { state.withLock { $0.holding = true } }

  /// Lets every held write through, and the later ones.
  func release() {
    let held = state.withLock { state in
      state.holding = false
      defer { state.held = [] }
      return state.held
    }
    for continuation in held { continuation.resume() }
  }

  /// Suspends until a write is held.
  func waitForHeldWrite() async {
    await withCheckedContinuation { continuation in
      let ready = state.withLock {
        if !$0.held.isEmpty { return true }
        $0.arrivals.append(continuation)
        return false
      }
      if ready { continuation.resume() }
    }
  }

  func load() async throws(ServerLogError) -> StoredLog { try inner.load() }

  func append(_ records: [StoredRecord]) async throws(ServerLogError) {
    await withCheckedContinuation { continuation in
      let (wait, arrivals) = state.withLock { state in
        state.appendCalls += 1
        guard state.holding else { return (false, [CheckedContinuation<Void, Never>]()) }
        state.held.append(continuation)
        defer { state.arrivals = [] }
        return (true, state.arrivals)
      }
      for arrival in arrivals { arrival.resume() }
      if !wait { continuation.resume() }
    }
    try inner.append(records)
  }

  func saveSnapshot(_ snapshot: StoredSnapshot) async throws(ServerLogError) { try inner.saveSnapshot(snapshot) }

  func truncate(after position: UInt64) async throws(ServerLogError) { try inner.truncate(after: position) }
}

/// Whether a task has finished, without waiting for it.
final class Finished: Sendable {
  private let flag = Mutex(false)
  var value: Bool { flag.withLock { $0 } }
  func set() { flag.withLock { $0 = true } }
}

@Suite("A durable server: answers wait for the log; a crash loses nothing acknowledged", .hangGuard)
struct DurableServerTests {
  typealias Server = EventServer<NoteBoard, ManualClock>

  func start(_ log: any ServerLog, clock: ManualClock = ManualClock(start: t0)) async throws -> Server {
    try await startDurableServer(log, clock: clock)
  }

  @Test("a mutation is answered only once its record is durable")
  func mutationWaitsForDurability() async throws {
    let log = HeldServerLog()
    let server = try await start(log)
    log.hold()
    let answered = Finished()
    let mutation = Task {
      let receipt = try await server.applyMutation(
        .post("hi", to: [bob]),
        from: alice,
        clientID: "c",
        mutationID: MutationID(rawValue: 1)
      )
      answered.set()
      return receipt
    }
    await log.waitForHeldWrite()
    #expect(!answered.value)
    #expect(await server.application.notes[bob] == ["hi"])  // applied in memory, not yet answered
    let before = log.inner.stored.records.count
    log.release()
    #expect(try await mutation.value.applied)
    #expect(log.inner.stored.records.count == before + 1)
  }

  @Test("a parked poll woken by a write gets its event only once the write is durable")
  func parkedPollWaitsForDurability() async throws {
    let log = HeldServerLog()
    let server = try await start(log)
    let registration = try await server.register(user: bob)
    let answered = Finished()
    let poll = Task {
      let events = try await server.events(queueID: registration.queueID, user: bob, lastEventID: -1)
      answered.set()
      return events
    }
    await server.waitForParkedPolls(count: 1)
    log.hold()
    let write = Task { try await server.handle(.post("hi", to: [bob]), from: alice) }
    await log.waitForHeldWrite()
    #expect(!answered.value)
    log.release()
    try await write.value
    #expect(try await poll.value.map(\.body) == [.payload(.note(text: "hi"))])
  }

  @Test(
    "a poll writes nothing and its answer waits for the events it reveals; a lost acknowledgement only redelivers"
  )
  func pollWaitsForWhatItReveals() async throws {
    let log = HeldServerLog()
    let server = try await start(log)
    let registration = try await server.register(user: bob)
    try await server.handle(.post("a", to: [bob]), from: alice)
    let base = await server.appendedPosition
    // Its event's command is durable: answered now, and the poll adds no record.
    let first = try await server.events(queueID: registration.queueID, user: bob, lastEventID: -1, dontBlock: true)
    #expect(first.map(\.body) == [.payload(.note(text: "a"))])
    #expect(await server.appendedPosition == base)
    log.hold()
    // A command held in the log: its record comes after the acknowledgement the first poll left (base + 1).
    let write = Task { try await server.handle(.post("b", to: [bob]), from: alice) }
    await server.waitUntilAppended(through: base + 2)
    await log.waitForHeldWrite()
    let answered = Finished()
    let second = Task {
      let events = try await server.events(
        queueID: registration.queueID,
        user: bob,
        lastEventID: first[0].id,
        dontBlock: true
      )
      answered.set()
      return events
    }
    // The poll that reveals the held command's event waits for it, and writes nothing itself.
    await server.waitForAnswersHeld(count: 1)
    #expect(!answered.value)
    #expect(await server.appendedPosition == base + 2)
    log.release()
    try await write.value
    let revealed = try await second.value
    #expect(revealed.map(\.body) == [.payload(.note(text: "b"))])

    // A crash now loses the second poll's acknowledgement, which no record holds: the client goes on from
    // the last id it got, with no error and nothing shown twice.
    let stored = log.inner.stored
    #expect(stored.records.map(\.position).max() == base + 2)
    let restarted = try await start(InMemoryServerLog(stored))
    let after = try await restarted.events(
      queueID: registration.queueID,
      user: bob,
      lastEventID: revealed[0].id,
      dontBlock: true
    )
    #expect(after.allSatisfy { $0.id > revealed[0].id && $0.body != .payload(.note(text: "b")) })
  }

  @Test("requests arriving during a write share the next one")
  func groupCommitShell() async throws {
    let log = HeldServerLog()
    let server = try await start(log)
    let callsBefore = log.appendCalls
    let start = await server.appendedPosition
    log.hold()
    // One client per write: the tasks reach the actor in any order, and one client's ids must not.
    let writes = (0..<50).map { index in
      Task {
        try await server.applyMutation(
          .post("n\(index)", to: [bob]),
          from: alice,
          clientID: ClientID(rawValue: "c\(index)"),
          mutationID: MutationID(rawValue: 1)
        )
      }
    }
    await log.waitForHeldWrite()
    await server.waitUntilAppended(through: start + 50)
    log.release()
    for write in writes { #expect(try await write.value.applied) }
    #expect(log.appendCalls - callsBefore == 2)
  }

  @Test("after a crash the server rebuilds from its log: acknowledged writes, queues and their ids are kept")
  func crashKeepsAcknowledged() async throws {
    let log = InMemoryServerLog()
    let clock = ManualClock(start: t0)
    var server: Server? = try await start(log, clock: clock)
    let registration = try await server!.register(user: bob)
    for index in 1...3 {
      _ = try await server!.applyMutation(
        .post("n\(index)", to: [bob]),
        from: alice,
        clientID: "c",
        mutationID: MutationID(rawValue: UInt64(index))
      )
    }
    let seen = try await server!.events(queueID: registration.queueID, user: bob, lastEventID: -1, dontBlock: true)
    #expect(seen.map(\.id) == [0, 1, 2])
    // Killed: no shutdown, no snapshot; what the log holds now is what the restart finds (the poll's
    // acknowledgement may still be on its way: its answer did not wait for it).
    let disk = InMemoryServerLog(log.stored)
    server = nil

    let restarted = try await start(disk, clock: clock)
    #expect(await restarted.application.notes[bob] == ["n1", "n2", "n3"])
    // The client resumes its queue without registering; the restart's event comes after a jump in ids.
    let after = try await restarted.events(queueID: registration.queueID, user: bob, lastEventID: 2, dontBlock: true)
    #expect(after.map(\.body) == [.restart])
    #expect(after[0].id > 1 << 20)
    // A retry of an acknowledged mutation is recognised, not applied again.
    let retry = try await restarted.applyMutation(
      .post("n3", to: [bob]),
      from: alice,
      clientID: "c",
      mutationID: MutationID(rawValue: 3)
    )
    #expect(!retry.applied)
    #expect(await restarted.application.notes[bob] == ["n1", "n2", "n3"])
  }

  @Test("a client whose finger is past the restored state is told its queue is gone; its ids are never reused")
  func fingerPastRestoredState() async throws {
    let log = InMemoryServerLog()
    let clock = ManualClock(start: t0)
    let server = try await start(log, clock: clock)
    let registration = try await server.register(user: bob)
    let backup = log.stored  // an operator's backup, taken before the write below
    _ = try await server.applyMutation(
      .post("lost", to: [bob]),
      from: alice,
      clientID: "c",
      mutationID: MutationID(rawValue: 1)
    )
    let seen = try await server.events(queueID: registration.queueID, user: bob, lastEventID: -1, dontBlock: true)
    #expect(seen.map(\.id) == [0])

    // The operator restores the backup; a write arrives before bob's client polls again.
    clock.advance(by: .seconds(5))
    let restored = try await start(InMemoryServerLog(backup), clock: clock)
    try await restored.handle(.post("new", to: [bob]), from: alice)
    let queue = try #require(await restored.queue(registration.queueID))
    #expect(queue.events.allSatisfy { $0.id != 0 })
    await #expect(throws: EventAPIError.badEventQueueID(registration.queueID)) {
      _ = try await restored.events(queueID: registration.queueID, user: bob, lastEventID: 0, dontBlock: true)
    }
    #expect(await restored.queue(registration.queueID) == nil)
  }

  @Test("a failing log: the write is not answered as applied, and the server refuses everything after")
  func failingLog() async throws {
    let log = InMemoryServerLog()
    let server = try await start(log)
    log.failEveryCall(with: .storage("disk full"))
    await #expect(throws: ServerLogError.storage("disk full")) {
      _ = try await server.applyMutation(
        .post("hi", to: [bob]),
        from: alice,
        clientID: "c",
        mutationID: MutationID(rawValue: 1)
      )
    }
    #expect(await server.waitForLogFailure() == ServerLogError.storage("disk full"))
    await #expect(throws: ServerLogError.storage("disk full")) { _ = try await server.register(user: bob) }
  }

  @Test("a snapshot drops the records it covers; a restart replays only what follows it")
  func snapshotThenRestart() async throws {
    let log = InMemoryServerLog()
    let clock = ManualClock(start: t0)
    let server = try await start(log, clock: clock)
    try await server.handle(.post("a", to: [bob]), from: alice)
    try await server.saveSnapshot()
    #expect(log.stored.records.isEmpty)
    try await server.handle(.post("b", to: [bob]), from: alice)
    let (restarted, report) = try await Server.recovering(
      from: log,
      application: NoteBoard(),
      clock: clock,
      anchor: clock.now,
      random: SeededRandomNumberGenerator(seed: 4)
    )
    #expect(report.replayed == 1)
    #expect(await restarted.application.notes[bob] == ["a", "b"])
  }
}
