import EventProtocol
import EventServer
import Foundation
import Observation
import SampleApps
import Synchronization
import TestScheduling
import Testing
import UpdateMachine
import UpdateMachineTesting

typealias NotesMachine = UpdateMachine<NoteSnapshot, NoteEvent, NoteBoard.Command>
typealias NotesSnapshot = NotesMachine.Snapshot

/// A server, a manual clock and a way to make alice's machines, shared by the session tests.
struct World {
  let clock = ManualClock()
  let server: EventServer<NoteBoard, ManualClock>
  let transport: FaultInjectingTransport<InProcessTransport<NoteBoard, ManualClock>, ManualClock>
  let storeURL = FileManager.default.temporaryDirectory.appendingPathComponent("alice-\(UUID()).updatemachine.json")

  init(serverConfiguration: EventServerConfiguration = .init()) {
    server = EventServer(
      application: NoteBoard(),
      configuration: serverConfiguration,
      clock: clock,
      anchor: clock.now,
      random: SeededRandomNumberGenerator(seed: 5)
    )
    transport = FaultInjectingTransport(
      InProcessTransport(server: server, user: "alice", throughWire: true),
      plan: FaultPlan(seed: 5),
      clock: clock
    )
  }

  func makeMachine(
    store: (any UpdateStore)? = nil,
    seed: UInt64 = 11,
    log: (@Sendable (UpdateMachineLogEvent) -> Void)? = nil,
    configure: (inout UpdateMachineConfiguration) -> Void = { _ in }
  ) -> NotesMachine {
    var configuration = UpdateMachineConfiguration()
    configure(&configuration)
    return UpdateMachine(
      reducer: NotesReducer(user: "alice"),
      transport: transport,
      store: store ?? FileStore(url: storeURL),
      clock: clock,
      anchor: clock.now,
      configuration: configuration,
      random: SeededRandomNumberGenerator(seed: seed),
      log: log
    )
  }

  /// Makes alice's machine, starts it, and waits until it is live.
  func startLiveMachine(
    store: (any UpdateStore)? = nil,
    configure: (inout UpdateMachineConfiguration) -> Void = { _ in }
  ) async -> NotesMachine {
    let machine = makeMachine(store: store, configure: configure)
    await machine.start()
    await waitFor(machine, isLive)
    return machine
  }

  func post(_ text: String) async throws {
    try await server.handle(.post(text, to: ["alice"]), from: "bob")
  }

  func cleanUp() {
    for suffix in ["", ".unreadable", ".unreadable-2"] {
      try? FileManager.default.removeItem(atPath: storeURL.path + suffix)
      try? FileManager.default.removeItem(atPath: storeURL.path + suffix + ".journal")
    }
  }
}

/// The file store without its journal: every save writes the whole record, so a test can edit the file.
struct WholeRecordStore: UpdateStore {
  let base: FileStore

  func load() throws(PersistenceError) -> Data? { try base.load() }
  func save(_ data: Data) throws(PersistenceError) { try base.save(data) }
  func setAside(reason: String) throws(PersistenceError) -> String { try base.setAside(reason: reason) }
}

/// Waits, without sleeping, until a snapshot satisfies `condition`; the suite's time limit catches a hang.
@discardableResult
func waitFor(_ machine: NotesMachine, _ condition: @Sendable (NotesSnapshot) -> Bool) async -> NotesSnapshot? {
  for await snapshot in await machine.snapshots() where condition(snapshot) {
    return snapshot
  }
  return nil
}

func isLive(_ snapshot: NotesSnapshot) -> Bool {
  if case .polling = snapshot.phase, snapshot.freshness.freshness == .live { return true }
  return false
}

/// A store in memory that counts its saves.
final class CountingStore: UpdateStore {
  private let base = InMemoryStore()
  private let count = Mutex(0)
  var saves: Int { count.withLock { $0 } }

  func load() throws(PersistenceError) -> Data? { try base.load() }
  func save(_ data: Data) throws(PersistenceError) {
    count.withLock { $0 += 1 }
    try base.save(data)
  }
  func setAside(reason: String) throws(PersistenceError) -> String { try base.setAside(reason: reason) }
}

@Suite("UpdateMachine shell on a manual clock against the in-process server", .hangGuard)
struct UpdateMachineShellTests {
  @Test("writes submitted together cost one save, and the server applies each once, in order")
  func submittedTogetherSaveOnce() async throws {
    let world = World()
    let store = CountingStore()
    let machine = await world.startLiveMachine(store: store)
    let before = store.saves
    let writes = (1...40).map { NoteBoard.Command.post("note \($0)", to: ["alice"]) }
    let ids = await machine.submit(contentsOf: writes)
    #expect(ids.count == 40)
    #expect(store.saves == before + 1)
    #expect(await machine.snapshot.state?.notes.count == 40)  // shown at once
    await waitFor(machine) { isLive($0) && $0.pendingMutations.isEmpty && $0.state?.notes.count == 40 }
    #expect(await world.server.application.notes["alice"] == (1...40).map { "note \($0)" })
    #expect(await machine.submit(contentsOf: []) == [])
    await machine.stop()
  }

  @Test("register, events, a dropped connection with backoff, and recovery")
  func registerEventsFailureRecovery() async throws {
    let world = World()
    defer { world.cleanUp() }
    try await world.post("before")
    let machine = world.makeMachine()
    await machine.start()
    await waitFor(machine) { isLive($0) && $0.state == NoteSnapshot(notes: ["before"]) }
    await world.server.waitForParkedPolls(count: 1)

    world.transport.failNext(.connectionFailed("wifi dropped"), .connectionFailed("still down"))
    try await world.post("during")
    let firstFailure = await waitFor(machine) { if case .pollFailed(_, 1, _) = $0.phase { true } else { false } }
    guard case .pollFailed(_, _, let firstRetryAt) = firstFailure?.phase else { return }
    #expect(firstFailure?.freshness.freshness == .settling)
    let failedAt = world.clock.now
    #expect(failedAt.duration(to: firstRetryAt) <= .milliseconds(100))
    world.clock.advance(to: firstRetryAt)
    let failed = await waitFor(machine) { if case .pollFailed(_, 2, _) = $0.phase { true } else { false } }
    #expect(failed?.state == NoteSnapshot(notes: ["before", "during"]))
    guard case .pollFailed(_, _, let retryAt) = failed?.phase else { return }
    #expect(failed?.freshness.freshness == .cannotConnect(since: failedAt, reason: "still down"))
    #expect(world.clock.now.duration(to: retryAt) <= .milliseconds(200))

    try await world.post("after")
    world.clock.advance(to: retryAt)
    let recovered = await waitFor(machine) { isLive($0) && $0.state?.notes.count == 3 }
    #expect(recovered?.state == NoteSnapshot(notes: ["before", "during", "after"]))
    #expect(recovered?.metrics.registers == 1)
    await machine.stop()
  }

  @Test("a long-poll with no answer times out after the server's recommended 90 s, as a connection failure")
  func longPollTimeout() async throws {
    var slowHeartbeats = EventServerConfiguration()
    slowHeartbeats.heartbeatMinimum = .seconds(500)
    slowHeartbeats.heartbeatMaximum = .seconds(500)
    let world = World(serverConfiguration: slowHeartbeats)
    defer { world.cleanUp() }
    let machine = await world.startLiveMachine()
    await world.server.waitForParkedPolls(count: 1)
    let start = world.clock.now
    world.clock.advance(to: start.advanced(by: .seconds(89)))
    #expect(
      await machine.snapshot.phase
        == .polling(EventFinger(queueID: machine.snapshot.phase.finger!.queueID, lastEventID: -1))
    )
    world.clock.advance(to: start.advanced(by: .seconds(90)))
    let timedOut = await waitFor(machine) { if case .pollFailed(_, 1, _) = $0.phase { true } else { false } }
    #expect(timedOut?.freshness.dataAsOf == start)
    guard case .pollFailed(_, _, let retryAt) = timedOut?.phase else { return }
    try await world.post("after the timeout")
    world.clock.advance(to: retryAt)
    let recovered = await waitFor(machine) { isLive($0) && $0.state?.notes == ["after the timeout"] }
    #expect(recovered?.metrics.failures == 1)
    await machine.stop()
  }

  @Test("an expired queue is re-registered, keeping the state on screen meanwhile")
  func expiryAndReregister() async throws {
    let world = World()
    defer { world.cleanUp() }
    let machine = await world.startLiveMachine {
      $0.backgroundPollInterval = nil
      $0.queueLifespan = .seconds(600)
    }
    try await world.post("one")
    await waitFor(machine) { $0.state == NoteSnapshot(notes: ["one"]) }

    await machine.enteredBackground()
    let start = world.clock.now
    for minute in 1...11 {
      world.clock.advance(to: start.advanced(by: .seconds(60 * Int64(minute))))
      await world.server.waitForTimerFiring(atOrAfter: world.clock.now)
    }
    #expect(await world.server.queueCount == 0)
    try await world.post("while expired")

    await machine.enteredForeground()
    let back = await waitFor(machine) { isLive($0) && $0.metrics.registers == 2 }
    #expect(back?.state == NoteSnapshot(notes: ["one", "while expired"]))

    let queueID = try #require(back?.phase.finger?.queueID)
    await world.server.waitForParkedPolls(count: 1)
    try await world.server.deleteQueue(queueID, user: "alice")
    let again = await waitFor(machine) { isLive($0) && $0.metrics.registers == 3 }
    #expect(again?.state == NoteSnapshot(notes: ["one", "while expired"]))
    await machine.stop()
  }

  @Test("in the background a push hint fetches news at once; the foreground long-polls again")
  func backgroundPush() async throws {
    let world = World()
    defer { world.cleanUp() }
    let machine = await world.startLiveMachine { $0.backgroundPollInterval = nil }
    await machine.enteredBackground()
    try await world.post("while away")
    #expect(await machine.snapshot.state == NoteSnapshot(notes: []))

    await machine.pushReceived(lastEventID: 0)
    let pushed = await waitFor(machine) { $0.confirmedState == NoteSnapshot(notes: ["while away"]) }
    guard case .idle = pushed?.phase else {
      Issue.record("expected idle, got \(String(describing: pushed?.phase))")
      return
    }
    await machine.pushReceived(lastEventID: 0)
    #expect(await machine.snapshot.metrics.pushHintsLate == 1)

    await machine.enteredForeground()
    await waitFor(machine, isLive)
    await world.server.waitForParkedPolls(count: 1)
    await machine.stop()
  }

  @Test("killed and restarted, the machine resumes from its file and its outbox applies once")
  func killAndRestart() async throws {
    let world = World()
    defer { world.cleanUp() }
    let first = await world.startLiveMachine()
    try await world.post("kept")
    await waitFor(first) { $0.state == NoteSnapshot(notes: ["kept"]) }

    world.transport.failNext(.serverError(status: 503))
    let mutation = await first.submit(.post("mine", to: ["alice"]))
    let pending = await waitFor(first) { $0.metrics.failures == 1 }
    #expect(pending?.pendingMutations.map(\.id) == [mutation])
    #expect(pending?.state == NoteSnapshot(notes: ["kept", "mine"]))
    #expect(pending?.confirmedState == NoteSnapshot(notes: ["kept"]))
    await first.stop()

    let second = world.makeMachine()
    await second.start()
    let resumed = await waitFor(second) { isLive($0) && $0.pendingMutations.isEmpty }
    #expect(resumed?.state == NoteSnapshot(notes: ["kept", "mine"]))
    #expect(resumed?.metrics.registers == 0)
    #expect(await world.server.application.notes["alice"] == ["kept", "mine"])
    await second.stop()
  }

  @Test("a corrupt file is set aside, reported, and the machine starts stale")
  func corruptFile() async throws {
    let world = World()
    defer { world.cleanUp() }
    try Data("{ not json".utf8).write(to: world.storeURL)
    let machine = world.makeMachine()
    await machine.start()
    let snapshot = await waitFor(machine, isLive)
    guard case .setAside(let problem, let location, let stranded) = snapshot?.storeRecovery.first else {
      Issue.record("no set-aside reported: \(String(describing: snapshot?.storeRecovery))")
      return
    }
    #expect(problem.isSameKind(as: .corrupt("")))
    #expect(location == world.storeURL.path + ".unreadable")
    #expect(stranded == nil)
    #expect(FileManager.default.fileExists(atPath: world.storeURL.path + ".unreadable"))
    #expect(try Data(contentsOf: URL(fileURLWithPath: world.storeURL.path + ".unreadable")) == Data("{ not json".utf8))
    await machine.stop()
  }

  @Test("a file from a newer format version is refused clearly and kept")
  func newerVersion() async throws {
    let world = World()
    defer { world.cleanUp() }
    try Data(#"{"version": 9}"#.utf8).write(to: world.storeURL)
    let machine = world.makeMachine()
    await machine.start()
    let snapshot = await machine.snapshot
    guard case .setAside(let problem, _, _) = snapshot.storeRecovery.first else {
      Issue.record("no set-aside reported: \(snapshot.storeRecovery)")
      return
    }
    #expect(problem.isSameKind(as: .newerVersion(found: 9, supported: 2)))
    #expect(problem.description.contains("version 9"))
    #expect(FileManager.default.fileExists(atPath: world.storeURL.path + ".unreadable"))
    await machine.stop()
  }

  @Test("unauthorized on register stops the machine with the reason")
  func unauthorized() async throws {
    let world = World()
    defer { world.cleanUp() }
    world.transport.failNext(.api(.unauthorized("Invalid API key")))
    let machine = world.makeMachine()
    await machine.start()
    let stopped = await waitFor(machine) { if case .stopped = $0.phase { true } else { false } }
    #expect(stopped?.stopReason == .unauthorized(message: "Invalid API key"))
    await machine.stop()
  }

  @Test("run() works until its task is cancelled, then stops the machine and finishes every stream")
  func runUntilCancelled() async throws {
    let world = World()
    defer { world.cleanUp() }
    let machine = world.makeMachine()
    let running = Task { await machine.run() }
    await waitFor(machine, isLive)
    let stream = await machine.snapshots()
    running.cancel()
    await running.value
    var remaining = 0
    for await _ in stream { remaining += 1 }
    #expect(remaining <= 1)
    var afterStop = 0
    for await _ in await machine.snapshots() { afterStop += 1 }
    #expect(afterStop == 0)
  }

  @Test("the observable model follows the machine")
  @MainActor
  func observableModel() async throws {
    let world = World()
    defer { world.cleanUp() }
    let machine = world.makeMachine()
    let model = UpdateMachineModel(machine: machine)
    await machine.start()
    await waitFor(machine, isLive)
    try await world.post("seen by the model")
    await waitFor(machine) { $0.state?.notes == ["seen by the model"] }
    let expected = await machine.snapshot.state
    while model.snapshot?.state != expected {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let resumed = Mutex(false)
        let resumeOnce: @Sendable () -> Void = {
          if resumed.withLock({ done in
            defer { done = true }
            return !done
          }) {
            continuation.resume()
          }
        }
        let current = withObservationTracking {
          model.snapshot?.state
        } onChange: {
          resumeOnce()
        }
        if current == expected { resumeOnce() }
      }
    }
    #expect(model.snapshot?.state == NoteSnapshot(notes: ["seen by the model"]))
    model.stopObserving()
    await machine.stop()
  }
}
