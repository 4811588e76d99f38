import EventProtocol
import EventServer
import Foundation
import SampleApps
import Synchronization
import TestScheduling
import Testing
import UpdateMachine
import UpdateMachineTesting

/// A store whose reads fail a given number of times before succeeding: a transient I/O error.
private final class FlakyReadStore: JournalingUpdateStore {
  private let base: InMemoryStore
  private let failuresLeft: Mutex<Int>

  init(data: Data?, journal: [Data]?, failingReads: Int) {
    base = InMemoryStore(data: data, journal: journal)
    failuresLeft = Mutex(failingReads)
  }

  var setAsideData: [Data] { base.setAsideData }

  func load() throws(PersistenceError) -> Data? {
    let fail = failuresLeft.withLock { left in
      defer { left -= 1 }
      return left > 0
    }
    if fail { throw .unreadable("EIO") }
    return try base.load()
  }

  func save(_ data: Data) throws(PersistenceError) { try base.save(data) }
  func setAside(reason: String) throws(PersistenceError) -> String { try base.setAside(reason: reason) }
  func appendToJournal(_ entry: Data) throws(PersistenceError) { try base.appendToJournal(entry) }
  func loadJournal(after record: Data) throws(PersistenceError) -> [Data]? { try base.loadJournal(after: record) }
}

@Suite("UpdateMachine shell: what real apps hit", .hangGuard)
struct UpdateMachineShellRealAppTests {
  @Test("a write whose answer is lost shows once, and its own event retires it before any retry")
  func lostAnswerOwnEventRetires() async throws {
    let world = World()
    defer { world.cleanUp() }
    let machine = await world.startLiveMachine()
    await world.server.waitForParkedPolls(count: 1)
    world.transport.scriptNext(.loseAnswer)
    _ = await machine.submit(.post("mine", to: ["alice"]))
    let settled = await waitFor(machine) { $0.pendingMutations.isEmpty && $0.confirmedState?.notes == ["mine"] }
    #expect(settled?.state == NoteSnapshot(notes: ["mine"]))
    #expect(settled?.metrics.submits == 1)
    #expect(await world.server.application.notes["alice"] == ["mine"])
    await machine.stop()
  }

  @Test("a register that never answers is abandoned at its deadline, and the machine gets through")
  func registerNeverAnswers() async throws {
    let world = World()
    defer { world.cleanUp() }
    world.transport.scriptNext(.neverAnswer)
    let machine = world.makeMachine()
    await machine.start()
    await waitFor(machine) { $0.phase == .registering }
    world.clock.advance(by: UpdateMachineConfiguration().registerTimeout)
    let failed = await waitFor(machine) { if case .registerFailed = $0.phase { true } else { false } }
    guard case .registerFailed(_, let retryAt) = failed?.phase else { return }
    world.clock.advance(to: retryAt)
    let live = await waitFor(machine, isLive)
    #expect(live?.metrics.registers == 2)
    await machine.stop()
  }

  @Test("a submit that never answers is abandoned at its deadline and sent again; it is applied once")
  func submitNeverAnswers() async throws {
    let world = World()
    defer { world.cleanUp() }
    let machine = await world.startLiveMachine()
    await world.server.waitForParkedPolls(count: 1)
    world.transport.scriptNext(.neverAnswer)
    _ = await machine.submit(.post("patient", to: ["bob"]))
    await waitFor(machine) { $0.metrics.submits == 1 }
    world.clock.advance(by: UpdateMachineConfiguration().submitTimeout)
    await waitFor(machine) { $0.metrics.submits == 1 && $0.metrics.failures == 1 }
    world.clock.advance(by: .milliseconds(100))
    let sent = await waitFor(machine) { $0.pendingMutations.isEmpty }
    #expect(sent?.metrics.submits == 2)
    #expect(await world.server.application.notes["bob"] == ["patient"])
    await machine.stop()
  }

  @Test("two installations restored from one backup: the second's write is not dropped, it gets a new client id")
  func restoredFromOneBackup() async throws {
    let world = World()
    defer { world.cleanUp() }
    let original = await world.startLiveMachine()
    _ = await original.submit(.post("before the backup", to: ["bob"]))
    await waitFor(original) { $0.pendingMutations.isEmpty }
    await original.stop()
    let backup = try Data(contentsOf: world.storeURL)

    let first = world.makeMachine(store: InMemoryStore(data: backup), seed: 21)
    let second = world.makeMachine(store: InMemoryStore(data: backup), seed: 22)
    await first.start()
    await second.start()
    _ = await first.submit(.post("from the first", to: ["bob"]))
    await waitFor(first) { $0.pendingMutations.isEmpty }
    _ = await second.submit(.post("from the second", to: ["bob"]))
    let recovered = await waitFor(second) { $0.pendingMutations.isEmpty }
    #expect(recovered?.metrics.clientIDResets == 1)
    #expect(recovered?.rejectedMutations.isEmpty == true)
    #expect(await world.server.application.notes["bob"] == ["before the backup", "from the first", "from the second"])
    await first.stop()
    await second.stop()
  }

  @Test("unauthorized stops with the reason; resume() after new credentials continues with the kept outbox")
  func resumeAfterUnauthorized() async throws {
    let world = World()
    defer { world.cleanUp() }
    let machine = await world.startLiveMachine()
    await world.server.waitForParkedPolls(count: 1)
    world.transport.failNext(.api(.unauthorized("token expired")))
    await machine.pushReceived()
    let stopped = await waitFor(machine) { $0.stopReason != nil }
    #expect(stopped?.stopReason == .unauthorized(message: "token expired"))
    _ = await machine.submit(.post("written while signed out", to: ["bob"]))
    #expect(await machine.snapshot.pendingMutations.count == 1)
    await machine.resume()
    let resumed = await waitFor(machine) { isLive($0) && $0.pendingMutations.isEmpty }
    #expect(resumed?.metrics.registers == 1)
    #expect(await world.server.application.notes["bob"] == ["written while signed out"])
    await machine.stop()
  }

  @Test("the log hook receives phase changes, requests, failures with their class, saves and outbox changes")
  func logging() async throws {
    let world = World()
    defer { world.cleanUp() }
    let events = Mutex<[UpdateMachineLogEvent]>([])
    let machine = world.makeMachine(log: { event in events.withLock { $0.append(event) } })
    await machine.start()
    await waitFor(machine, isLive)
    world.transport.failNext(.serverError(status: 502))
    _ = await machine.submit(.post("logged", to: ["bob"]))
    await waitFor(machine) { $0.metrics.failures == 1 }
    let logged = events.withLock { $0 }
    #expect(logged.first == .loaded(finger: nil, pendingWrites: 0, recovery: []))
    #expect(logged.contains(.phaseChanged(from: .stale, to: .registering)))
    #expect(logged.contains(.requestSent(RequestID(rawValue: 1), .register)))
    #expect(logged.contains(.requestSucceeded(RequestID(rawValue: 1), .register)))
    #expect(logged.contains { if case .saved = $0 { true } else { false } })
    #expect(logged.contains(.outboxChanged(pending: 1, rejected: 0)))
    #expect(
      logged.contains {
        if case .requestFailed(_, .submit([MutationID(1)]), .serverError(status: 502), .server) = $0 {
          true
        } else {
          false
        }
      }
    )
    await machine.stop()
  }

  @Test("a transient read error is retried, not set aside; a read error that persists sets the file aside")
  func transientReadError() async throws {
    let world = World()
    defer { world.cleanUp() }
    let original = await world.startLiveMachine()
    _ = await original.submit(.post("kept", to: ["bob"]))
    await original.stop()
    let saved = try Data(contentsOf: world.storeURL)
    // The write went to the journal after the record: the flaky store holds both.
    let journal = try FileStore(url: world.storeURL).loadJournal(after: saved)
    #expect(journal?.count == 1)

    let flaky = FlakyReadStore(data: saved, journal: journal, failingReads: NotesMachine.loadAttempts - 1)
    let machine = world.makeMachine(store: flaky)
    await machine.start()
    let snapshot = await machine.snapshot
    #expect(snapshot.storeRecovery.isEmpty)
    #expect(snapshot.pendingMutations.map(\.mutation) == [.post("kept", to: ["bob"])])
    #expect(flaky.setAsideData.isEmpty)
    await machine.stop()

    let broken = FlakyReadStore(data: saved, journal: journal, failingReads: NotesMachine.loadAttempts)
    let unlucky = world.makeMachine(store: broken)
    await unlucky.start()
    guard case .setAside(let problem, let location, nil)? = await unlucky.snapshot.storeRecovery.first else {
      Issue.record("a persistent read error was not reported as set aside")
      return
    }
    #expect(problem.isSameKind(as: .unreadable("")))
    #expect(location != nil)
    #expect(broken.setAsideData == [saved])
    await unlucky.stop()
  }

  @Test("a file whose outbox no longer decodes is set aside, and the snapshot says how many writes it held")
  func strandedWritesReported() async throws {
    let world = World()
    defer { world.cleanUp() }
    // Whole saves, so the outbox is in the record file this test edits (not in the journal after it).
    let original = await world.startLiveMachine(store: WholeRecordStore(base: FileStore(url: world.storeURL)))
    await original.enteredBackground()
    world.transport.partitioned = true
    _ = await original.submit(.post("one", to: ["bob"]))
    _ = await original.submit(.post("two", to: ["bob"]))
    await original.stop()
    let saved = try Data(contentsOf: world.storeURL)
    var object = try #require(try JSONSerialization.jsonObject(with: saved) as? [String: Any])
    var outbox = try #require(object["outbox"] as? [[String: Any]])
    outbox[0]["mutation"] = ["renamedCase": [:]]
    object["outbox"] = outbox
    let store = InMemoryStore(data: try JSONSerialization.data(withJSONObject: object))
    world.transport.partitioned = false
    let machine = world.makeMachine(store: store)
    await machine.start()
    let snapshot = await waitFor(machine, isLive)
    guard case .setAside(_, let location, 2)? = snapshot?.storeRecovery.first else {
      Issue.record("stranded writes not reported: \(String(describing: snapshot?.storeRecovery))")
      return
    }
    #expect(location == "memory#1")
    #expect(store.setAsideData.count == 1)
    #expect(snapshot?.metrics.registers == 0)
    await machine.stop()
  }

  @Test("a device back from a long absence catches up in bounded batches, each applied and acknowledged")
  func catchesUpInBatches() async throws {
    let world = World()
    defer { world.cleanUp() }
    let first = await world.startLiveMachine { $0.pollBatchLimit = 10 }
    await first.stop()
    for index in 0..<25 { try await world.post("n\(index)") }
    let machine = world.makeMachine(configure: { $0.pollBatchLimit = 10 })
    await machine.start()
    let caughtUp = await waitFor(machine) { $0.confirmedState?.notes.count == 25 }
    #expect(caughtUp?.state?.notes == (0..<25).map { "n\($0)" })
    #expect((caughtUp?.metrics.polls ?? 0) >= 3)
    await machine.stop()
  }
}
