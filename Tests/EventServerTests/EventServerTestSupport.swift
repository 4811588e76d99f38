import EventProtocol
import EventServer
import SampleApps
import UpdateMachineTesting

@testable import EventServer

/// The server core over the sample note board, as the EventServer tests drive it.
typealias Machine = EventServerStateMachine<NoteBoard>

let t0 = Timestamp(secondsSinceEpoch: 1_700_000_000)
let alice: UserID = "alice"
let bob: UserID = "bob"
let carol: UserID = "carol"

/// A server core at `t0` with the default configuration, changed by `configure`.
func makeMachine(
  _ configure: (inout EventServerConfiguration) -> Void = { _ in },
  seed: UInt64 = 7
) -> Machine {
  var configuration = EventServerConfiguration()
  configure(&configuration)
  return Machine(
    application: NoteBoard(),
    configuration: configuration,
    random: SeededRandomNumberGenerator(seed: seed),
    now: t0
  )
}

/// A durable note-board server recovered from `log`, on a manual clock.
func startDurableServer(
  _ log: any ServerLog,
  clock: ManualClock = ManualClock(start: t0)
) async throws -> EventServer<NoteBoard, ManualClock> {
  try await EventServer<NoteBoard, ManualClock>.recovering(
    from: log,
    application: NoteBoard(),
    clock: clock,
    anchor: clock.now,
    random: SeededRandomNumberGenerator(seed: 3)
  ).0
}

/// A cluster node over the sample note board on a manual clock, as the cluster tests drive it.
typealias NoteNode = EventServer<NoteBoard, ManualClock>

/// A node joining `log` at `t0`, its random source seeded with `seed`.
func joinNode(_ log: InMemorySharedLog, clock: ManualClock, seed: UInt64) async throws -> NoteNode {
  try await NoteNode.joining(
    log,
    application: NoteBoard(),
    clock: clock,
    anchor: t0,
    random: SeededRandomNumberGenerator(seed: seed)
  ).0
}

/// The last position the shared log holds.
func lastPosition(_ log: InMemorySharedLog) -> UInt64 { log.stored.records.last?.position ?? 0 }
