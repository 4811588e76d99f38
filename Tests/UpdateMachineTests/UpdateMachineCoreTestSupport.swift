import EventProtocol
import SampleApps
import UpdateMachineTesting

@testable import UpdateMachine

typealias Core = UpdateMachineCore<NoteSnapshot, NoteEvent, NoteBoard.Command>
typealias Action = Core.Action

let t0 = Timestamp(secondsSinceEpoch: 1_700_000_000)
let alice: UserID = "alice"
let queueA: QueueID = "queue-a"
let queueB: QueueID = "queue-b"

func request(_ number: UInt64) -> RequestID { RequestID(rawValue: number) }

func note(_ id: Int, _ text: String) -> EventEnvelope<NoteEvent> {
  EventEnvelope(id: id, body: .payload(.note(text: text)))
}

func registration(_ queueID: QueueID = queueA, lastEventID: Int = -1, notes: [String]) -> Registration<NoteSnapshot> {
  Registration(
    queueID: queueID,
    lastEventID: lastEventID,
    longPollTimeout: .seconds(90),
    snapshot: NoteSnapshot(notes: notes)
  )
}

/// A core plus a hand-moved clock, with helpers that keep tests to the point.
struct CoreHarness {
  var core: Core
  var now = t0

  init(
    lifecycle: AppLifecycle = .foreground,
    seed: UInt64 = 1,
    configure: (inout UpdateMachineConfiguration) -> Void = { _ in }
  ) {
    var configuration = UpdateMachineConfiguration()
    configure(&configuration)
    core = Core(
      reducer: NotesReducer(user: alice),
      configuration: configuration,
      lifecycle: lifecycle,
      random: SeededRandomNumberGenerator(seed: seed)
    )
  }

  mutating func advance(_ duration: Duration) {
    now = now.advanced(by: duration)
  }

  /// Loads nothing and registers successfully on `queueA` with `notes`; returns the actions of the success.
  @discardableResult
  mutating func startLive(notes: [String] = []) -> [Action] {
    _ = core.loaded(nil, now: now)
    return core.registerSucceeded(request(1), registration(notes: notes), now: now)
  }

  /// Submits a write and reports every save it asks for as successful, returning all the actions.
  mutating func submit(_ mutation: NoteBoard.Command, now: Timestamp) -> (MutationID, [Action]) {
    let (id, actions) = core.submit(mutation, now: now)
    return (id, acknowledgingSaves(actions, now: now))
  }

  /// Reports every `.persist` in `actions` (and in what follows) as saved; returns every action.
  mutating func acknowledgingSaves(_ actions: [Action], now: Timestamp) -> [Action] {
    var all = actions
    var index = 0
    while index < all.count {
      if case .persist(let record, _) = all[index] { all += core.persistSucceeded(record, now: now) }
      index += 1
    }
    return all
  }

  /// This installation's client id (the core must be loaded).
  var clientID: ClientID { core.clientID! }

  /// The persisted record the core would write now.
  var record: PersistedRecord<NoteSnapshot, NoteBoard.Command> { core.persistedRecord() }
}

/// The queue lifespan a default configuration asks for.
let defaultLifespan = UpdateMachineConfiguration().queueLifespan
