import EventProtocol
import EventServer
import UpdateMachine

/// Your application, for the simulation: its server application, its reducer, and what its users write.
/// ``Simulation/run(_:app:)`` puts it in the same world as the video app — users opening and leaving the
/// app on a schedule every strategy shares, a network that delays, fails and partitions, a push service that
/// loses and reorders, a phone OS that suspends and rations, kills between two persistence steps, a durable
/// server that restarts and crashes — and ``Sweep`` finds the cheapest way to keep it right.
///
/// ```swift
/// struct NoteTaking: SimulatedApp {
///   func makeApplication() -> NoteBoard { NoteBoard() }
///   func makeReducer(for user: UserID) -> NotesReducer { NotesReducer(user: user) }
///   func write(by user: UserID, friends: [UserID], using random: inout SeededRandomNumberGenerator) -> NoteBoard.Command {
///     .post("note \(random.next() % 1000)", to: [user] + friends.prefix(1))
///   }
/// }
/// let report = Simulation.run(Scenario(seed: 1), app: NoteTaking())
/// ```
public protocol SimulatedApp: Sendable {
  /// The server application.
  associatedtype Application: ServerApplication & Codable
  /// The reducer devices run.
  associatedtype Reducer: UpdateReducer
  where
    Reducer.State == Application.Snapshot, Reducer.Event == Application.Event,
    Reducer.Mutation == Application.Command

  /// The server application at the start of a run (and after a restart, before its log is replayed).
  func makeApplication() -> Application
  /// The reducer of a device signed in as `user`.
  func makeReducer(for user: UserID) -> Reducer
  /// What `user` writes at one of the moments their script gives, drawn from `random` (a stream of its own:
  /// every strategy sees the same writes).
  func write(
    by user: UserID,
    friends: [UserID],
    using random: inout SeededRandomNumberGenerator
  )
    -> Application.Command
  /// Whether a device showing `shown` shows its user something wrong next to the server's `server`: what
  /// the "wrong state on screen" figures count. By default, whenever the two differ.
  func showsWrong(_ shown: Application.Snapshot, server: Application.Snapshot) -> Bool
}

extension SimulatedApp {
  public func showsWrong(_ shown: Application.Snapshot, server: Application.Snapshot) -> Bool { shown != server }
}

/// A ``SimulatedApp`` as a domain of the world: nothing beside the engine; the user's writes go through
/// the outbox.
enum AppDomain<App: SimulatedApp>: SimulatedDomain {
  typealias Application = App.Application
  typealias Reducer = App.Reducer
  typealias WorldState = App
  /// Nothing beside the engine.
  struct DeviceState {}
  typealias Happening = Never

  static func makeApplication(in app: App) -> App.Application { app.makeApplication() }

  static func makeReducer(for user: UserID, in app: App) -> App.Reducer { app.makeReducer(for: user) }

  static func makeDeviceState(device index: Int, epoch: Int, scenario: Scenario) -> DeviceState { DeviceState() }

  static func userActs(_ index: Int, _ planned: DeviceScript.Recording, in world: inout SimulationWorld<Self>) {
    let user = world.devices[index].user
    var random = SeededRandomNumberGenerator(seed: planned.recipientDraw)
    let command = world.domain.write(by: user, friends: world.users.filter { $0 != user }, using: &random)
    let epoch = world.devices[index].epoch
    let (_, actions) = world.devices[index].core.submit(command, now: world.now)
    world.perform(actions, on: index)
    // A kill before the save loses the write with the rest of memory: only saved writes count.
    if world.devices[index].epoch == epoch { world.devices[index].actionsSaved += 1 }
  }

  static func showsWrong(_ index: Int, server: App.Application.Snapshot, in world: SimulationWorld<Self>) -> Bool {
    world.devices[index].displayedState.map { world.domain.showsWrong($0, server: server) } ?? false
  }

  static func outcomes(in world: SimulationWorld<Self>) -> (made: Int, completed: Int) {
    let made = world.devices.map(\.actionsSaved).reduce(0, +)
    return (made, made - world.devices.map(\.pendingMutations.count).reduce(0, +))
  }
}
