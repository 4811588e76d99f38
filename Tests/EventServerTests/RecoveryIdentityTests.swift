import EventProtocol
import Foundation
import JSONCoding
import SampleApps
import TestScheduling
import Testing
import UpdateMachineTesting

@testable import EventServer

/// Event ids are never handed out twice with different events, whatever happened to the storage: each
/// recovery skips a random distance, and a client that saw a lost incarnation's ids is told to re-register.
@Suite("Recovery: no event id reused after storage went back", .hangGuard)
struct RecoveryIdentityTests {
  typealias Server = EventServer<NoteBoard, ManualClock>

  /// Starts a server on a copy of `stored`, at `t0` on a clock that never moves: every start happens "in the
  /// same second", which is what made the clock's rule repeat ids.
  func start(_ stored: StoredLog) async throws -> (Server, InMemoryServerLog) {
    let log = InMemoryServerLog(stored)
    let (server, _) = try await EventServer.recovering(
      from: log,
      application: NoteBoard(),
      clock: ManualClock(),
      anchor: t0
    )
    return (server, log)
  }

  /// A cluster node on `log`.
  func join(_ log: InMemorySharedLog) async throws -> Server {
    let (node, _) = try await Server.joining(log, application: NoteBoard(), clock: ManualClock(), anchor: t0)
    return node
  }

  /// The stored state with a queue for alice, and her finger.
  func storedWithQueue() async throws -> (StoredLog, QueueID, Int) {
    let (server, log) = try await start(StoredLog(snapshot: nil, records: []))
    let registration = try await server.register(user: alice, eventTypes: ["note"])
    try await server.handle(.post("before", to: [alice]), from: bob)
    // Alice's client reads it and acknowledges it: her finger is durable.
    let before = try await server.events(queueID: registration.queueID, user: alice, lastEventID: -1, dontBlock: true)
    let finger = try #require(before.last?.id)
    _ = try await server.events(queueID: registration.queueID, user: alice, lastEventID: finger, dontBlock: true)
    await server.shutdown()
    return (log.stored, registration.queueID, finger)
  }

  /// A lost incarnation: starts from `stored`, hands alice's queue an event, and is lost (its storage is
  /// thrown away). Returns the id alice's client acknowledges next.
  func lostIncarnation(from stored: StoredLog, queue: QueueID, finger: Int) async throws -> Int {
    let (lost, _) = try await start(stored)
    try await lost.handle(.post("lost", to: [alice]), from: bob)
    let seen = try await lost.events(queueID: queue, user: alice, lastEventID: finger, dontBlock: true)
    await lost.shutdown()
    return try #require(seen.last?.id)
  }

  @Test("a restart in the same second from the same stored state hands out other ids; the lost run's finger is refused")
  func sameSecondRestart() async throws {
    let (stored, queue, finger) = try await storedWithQueue()
    let lostFinger = try await lostIncarnation(from: stored, queue: queue, finger: finger)
    // The storage went back to `stored` (the lost run's records never became durable, or were restored over).
    let (server, _) = try await start(stored)
    try await server.handle(.post("new", to: [alice]), from: bob)
    let fresh = try await server.events(queueID: queue, user: alice, lastEventID: finger, dontBlock: true)
    #expect(!fresh.map(\.id).contains(lostFinger))
    await #expect(throws: EventAPIError.badEventQueueID(queue)) {
      _ = try await server.events(queueID: queue, user: alice, lastEventID: lostFinger, dontBlock: true)
    }
    await server.shutdown()
  }

  @Test("many quick restarts, then a restore of the state before them: no id of any lost run is handed out again")
  func quickRestartsThenRestore() async throws {
    let (stored, queue, finger) = try await storedWithQueue()
    var current = stored
    var lostIDs: [Int] = []
    for _ in 0..<8 {
      let (server, log) = try await start(current)
      try await server.handle(.post("lost", to: [alice]), from: bob)
      lostIDs += try await server.events(queueID: queue, user: alice, lastEventID: finger, dontBlock: true).map(\.id)
      await server.shutdown()
      current = log.stored
    }
    let (restored, _) = try await start(stored)
    for text in ["a", "b", "c"] { try await restored.handle(.post(text, to: [alice]), from: bob) }
    let fresh = try await restored.events(queueID: queue, user: alice, lastEventID: finger, dontBlock: true)
    #expect(Set(fresh.map(\.id)).isDisjoint(with: lostIDs))
    for lost in Set(lostIDs) {
      let (server, _) = try await start(stored)
      await #expect(throws: EventAPIError.badEventQueueID(queue)) {
        _ = try await server.events(queueID: queue, user: alice, lastEventID: lost, dontBlock: true)
      }
      await server.shutdown()
    }
    await restored.shutdown()
  }

  @Test("a recovery's skip is recorded and replayed: a server rebuilt from the log has the same ids")
  func skipIsReplayed() async throws {
    let (stored, queue, _) = try await storedWithQueue()
    let (server, log) = try await start(stored)
    let next = try #require(await server.queue(queue)?.nextEventID)
    await server.shutdown()
    let (again, _) = try Server.Machine.rebuilding(
      from: log.stored,
      application: NoteBoard(),
      random: SeededRandomNumberGenerator(seed: 9),
      now: t0
    )
    #expect(again.queue(queue)?.nextEventID == next)
    let skipped = try #require(again.queue(queue)?.skippedIDs.last)
    #expect(EventServerStateMachine<NoteBoard>.idSkipRange.contains(skipped.count))
  }

  @Test("a recovery recorded before skips were drawn replays as it ran: to the clock")
  func oldRecoveryReplays() throws {
    var machine = makeMachine()
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    machine.replay(ServerLogEntry(time: t0, input: .recovered(idSkip: nil)))
    #expect(machine.queue(queue)?.skippedIDs == [0..<1_700_000_000 * 1_000_000])
    // Records written before the skip was drawn held `"recovered":{}`, which is what one without a skip is.
    let encoded = try WireJSON.encodeData(
      ServerLogEntry<NoteBoard.Command>(time: t0, input: .recovered(idSkip: nil)),
      sortedKeys: true
    )
    #expect(String(decoding: encoded, as: UTF8.self).contains(#""input":{"recovered":{}}"#))
    let old = try WireJSON.decode(ServerLogEntry<NoteBoard.Command>.self, from: encoded)
    guard case .recovered(nil) = old.input else {
      Issue.record("an old recovery record did not decode as one without a skip: \(old.input)")
      return
    }
  }

  @Test(
    "a cluster whose database is restored to an older dump: the first node to start skips ids; the lost finger is refused"
  )
  func clusterRestoredFromDump() async throws {
    let log = InMemorySharedLog()
    let first = try await join(log)
    let second = try await join(log)
    let queue = try await first.register(user: alice, eventTypes: ["note"]).queueID
    try await first.handle(.post("before", to: [alice]), from: bob)
    let finger = try #require(
      try await second.events(queueID: queue, user: alice, lastEventID: -1, dontBlock: true).last?.id
    )
    _ = try await second.events(queueID: queue, user: alice, lastEventID: finger, dontBlock: true)
    await second.waitUntilAppended(through: log.stored.records.last?.position ?? 0)
    let dump = log.stored
    // After the dump: another event, seen by alice's client; then every node is gone and the dump restored.
    try await second.handle(.post("lost", to: [alice]), from: bob)
    let lostFinger = try #require(
      try await first.events(queueID: queue, user: alice, lastEventID: finger, dontBlock: true).last?.id
    )
    await first.shutdown()
    await second.shutdown()
    let restored = InMemorySharedLog(dump)
    let again = try await join(restored)
    let joiner = try await join(restored)
    try await again.handle(.post("new", to: [alice]), from: bob)
    try await joiner.handle(.post("newer", to: [alice]), from: bob)
    await again.waitUntilAppended(through: restored.stored.records.last?.position ?? 0)
    let fresh = try await again.events(queueID: queue, user: alice, lastEventID: finger, dontBlock: true)
    #expect(fresh.compactMap { if case .payload(.note(let text)) = $0.body { text } else { nil } } == ["new", "newer"])
    #expect(!fresh.map(\.id).contains(lostFinger))
    await #expect(throws: EventAPIError.badEventQueueID(queue)) {
      _ = try await joiner.events(queueID: queue, user: alice, lastEventID: lostFinger, dontBlock: true)
    }
    await again.shutdown()
    await joiner.shutdown()
  }
}
