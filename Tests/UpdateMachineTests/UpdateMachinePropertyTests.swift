import EventProtocol
import EventServer
import Foundation
import SampleApps
import TestScheduling
import Testing
import UpdateMachine
import UpdateMachineTesting

/// Random schedules of responses, failures, lost answers, lifecycle changes, pushes, writes, failed saves,
/// crashes (between any two actions) and server restarts, for two installations of alice's app against the
/// real server core (``LoopbackWorld``). Then the faults stop, and every device must converge. Writes come
/// alone and in bursts, and each seed sends its outbox in batches of 1, 2, 3 or 64: every batch is applied
/// in order, each write once.
@Suite("UpdateMachine properties over random schedules")
struct UpdateMachinePropertyTests {
  @Test(
    "no event applied twice or skipped, no write lost or applied twice, convergence",
    .cpuBound,
    arguments: TestSeeds.first(200, of: 1_000) as Range<UInt64>
  )
  func convergesUnderFaults(seed: UInt64) {
    var run = PropertyRun(seed: seed)
    for _ in 0..<150 where run.failure == nil {
      run.chaoticStep()
      run.checkInvariants()
    }
    if run.failure == nil {
      if run.world.runUntilSettled(maximumSteps: 600) {
        run.checkInvariants()
        run.checkEveryDurableWriteAppliedOnce()
      } else {
        let devices = run.world.devices.map {
          "\($0.core.phase), outbox \($0.core.pendingMutations), save issue \(String(describing: $0.core.persistenceIssue)), "
            + "next wake-up \(String(describing: $0.core.nextWakeUp(after: run.world.now)))"
        }
        run.fail("did not converge at \(run.world.now): \(devices)")
      }
    }
    if let failure = run.failure {
      Issue.record(
        "seed \(seed): \(failure)\ntrace (replay with this seed):\n\(run.world.trace.suffix(40).joined(separator: "\n"))"
      )
    }
  }
}

private struct PropertyRun {
  static let alice: UserID = "alice"

  var world: LoopbackWorld<NoteBoard, NotesReducer>
  var random: SeededRandomNumberGenerator
  var failure: String?
  var writeCount = 0
  /// Every write that was in a saved record at some point: it must reach the server exactly once (or be
  /// refused), whatever crashes and failed saves come after.
  var durableWrites: Set<String> = []
  var lastDisks: [Data?]
  /// Each device's writes, in the order the app submitted them.
  var submitted: [[String]] = [[], []]

  init(seed: UInt64) {
    world = LoopbackWorld(
      application: NoteBoard(),
      reducer: { NotesReducer(user: $0) },
      devices: [Self.alice, Self.alice],
      seed: seed ^ 0xABCD,
      configuration: {
        var configuration = UpdateMachineConfiguration()
        configuration.backgroundPollInterval = .seconds(120)
        configuration.queueLifespan = .seconds(600)
        configuration.maximumMutationsPerRequest = [1, 2, 3, 64][Int(seed % 4)]
        return configuration
      }()
    )
    random = SeededRandomNumberGenerator(seed: seed)
    lastDisks = world.devices.map(\.disk)
  }

  mutating func fail(_ message: String) {
    if failure == nil { failure = message }
  }

  mutating func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
  }

  mutating func chaoticStep() {
    switch Int.random(in: 0..<100, using: &random) {
    case 0..<10:
      writeCount += 1
      let recipients: [UserID] = Bool.random(using: &random) ? [Self.alice] : ["bob"]
      try! world.serverCommand(.post("n\(writeCount)", to: recipients), from: "bob")
    case 10..<20:
      writeCount += 1
      let device = Int.random(in: world.devices.indices, using: &random)
      let mutation: NoteBoard.Command =
        Int.random(in: 0..<8, using: &random) == 0 ? .forbidden : .post("m\(writeCount)", to: [Self.alice])
      world.submit(mutation, on: device)
      if case .post(let text, _) = mutation { submitted[device].append(text) }
    case 20..<24:
      // A burst: several writes before any answer, so batches carry more than one.
      let device = Int.random(in: world.devices.indices, using: &random)
      for _ in 0..<Int.random(in: 2...6, using: &random) {
        writeCount += 1
        world.submit(.post("m\(writeCount)", to: [Self.alice]), on: device)
        submitted[device].append("m\(writeCount)")
      }
    default:
      world.chaoticStep()
    }
    noteDurableWrites()
  }

  /// Reads each device's disk when it changed, remembering the writes its outbox holds.
  mutating func noteDurableWrites() {
    for (index, device) in world.devices.enumerated() where device.disk != lastDisks[index] {
      lastDisks[index] = device.disk
      guard let disk = device.disk else { continue }
      do {
        let record = try PersistedRecord<NoteSnapshot, NoteBoard.Command>.decode(disk)
        for entry in record.outbox { if case .post(let text, _) = entry.mutation { durableWrites.insert(text) } }
      } catch {
        fail("device \(index) saved a record that does not decode: \(error)")
      }
    }
  }

  mutating func checkInvariants() {
    let serverNotes = world.server.application.notes[Self.alice] ?? []
    let counts = Dictionary(serverNotes.map { ($0, 1) }, uniquingKeysWith: +)
    check(counts.values.allSatisfy { $0 == 1 }, "a note was applied twice on the server: \(serverNotes)")
    for (index, writes) in submitted.enumerated() {
      let position = Dictionary(uniqueKeysWithValues: writes.enumerated().map { ($1, $0) })
      let applied = serverNotes.compactMap { position[$0] }
      check(applied == applied.sorted(), "device \(index)'s writes applied out of order: \(serverNotes)")
    }
    for (index, device) in world.devices.enumerated() {
      if let state = device.core.confirmedState {
        check(
          serverNotes.starts(with: state.notes),
          "device \(index) state \(state.notes) is not a prefix of the server's \(serverNotes)"
        )
      }
      if let finger = device.core.phase.finger, let queue = world.server.queues[finger.queueID] {
        check(finger.lastEventID <= queue.lastEventID, "finger \(finger) beyond the queue's last id")
      }
      if device.core.freshness(now: world.now).freshness == .live {
        if case .polling = device.core.phase {} else { fail("freshness live in phase \(device.core.phase)") }
      }
    }
  }

  mutating func checkEveryDurableWriteAppliedOnce() {
    let serverNotes = world.server.application.notes[Self.alice] ?? []
    let counts = Dictionary(serverNotes.map { ($0, 1) }, uniquingKeysWith: +)
    let refused = Set(
      world.devices.flatMap(\.core.rejectedMutations).compactMap {
        if case .post(let text, _) = $0.mutation { text } else { nil }
      }
    )
    for text in durableWrites.sorted() where !refused.contains(text) {
      check(counts[text] == 1, "durable write \(text) applied \(counts[text] ?? 0) times")
    }
  }
}
