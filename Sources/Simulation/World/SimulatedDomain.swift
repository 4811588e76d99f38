import EventProtocol
import EventServer
import UpdateMachine

/// What one application brings to the simulated world: its server application and reducer, the state its
/// world and each device keep beside the engine, its own happenings, and what the world asks of it at each
/// step. The world does the rest — users and their scripts, the network, pushes, the phone's OS, kills, the
/// durable server, the engine's plumbing, the invariants every application shares and the figures.
///
/// Hooks are static and take the world `inout`, so a domain's code reads and changes the world as the world's
/// own does. Every hook has a default for an application with nothing beside the engine
/// (``SimulatedApp`` is the public way in).
protocol SimulatedDomain {
  associatedtype Application: ServerApplication & Codable
  associatedtype Reducer: UpdateReducer
  where
    Reducer.State == Application.Snapshot, Reducer.Event == Application.Event,
    Reducer.Mutation == Application.Command
  /// What the domain keeps for the whole world.
  associatedtype WorldState
  /// What the domain keeps per device, beside the engine.
  associatedtype DeviceState
  /// The domain's own happenings on the world's clock.
  associatedtype Happening

  /// A new server application.
  static func makeApplication(in world: WorldState) -> Application
  /// The reducer of a device signed in as `user`.
  static func makeReducer(for user: UserID, in world: WorldState) -> Reducer
  /// How many devices user number `user` (from 0) has.
  static func deviceCount(ofUser user: Int, in world: WorldState, scenario: Scenario) -> Int
  /// A device's state at launch number `epoch` (0 for a new install).
  static func makeDeviceState(device index: Int, epoch: Int, scenario: Scenario) -> DeviceState

  /// The part of the application's snapshot compared whole with the server's (a domain that keeps part of
  /// its state in pages strips them; they are checked apart).
  static func wholePart(of snapshot: Application.Snapshot) -> Application.Snapshot

  /// The device one of the domain's happenings is about (its due timer runs first).
  static func device(of happening: Happening) -> Int?
  /// Runs one of the domain's happenings.
  static func handle(_ happening: Happening, in world: inout SimulationWorld<Self>)

  /// The user of device `index` acts, at one of the moments the script gives.
  static func userActs(_ index: Int, _ planned: DeviceScript.Recording, in world: inout SimulationWorld<Self>)
  /// The app of device `index` came on screen (after the engine heard of it).
  static func appOpened(_ index: Int, in world: inout SimulationWorld<Self>)
  /// The engine of device `index` moved: check the domain's invariants, follow its state.
  static func engineChanged(_ index: Int, in world: inout SimulationWorld<Self>)
  /// The running app of device `index` heard that the network is gone or back (after the engine).
  static func networkChanged(_ index: Int, online: Bool, in world: inout SimulationWorld<Self>)
  /// The device's timer went off (after the engine's part).
  static func timerFired(_ index: Int, in world: inout SimulationWorld<Self>)
  /// When the device's domain state next needs its timer, if ever.
  static func nextWakeUp(_ index: Int, in world: SimulationWorld<Self>) -> Timestamp?
  /// The engine's record of device `index` was saved.
  static func saved(_ index: Int, in world: inout SimulationWorld<Self>)
  /// The app of device `index` is about to be killed (its memory is still there).
  static func killing(_ index: Int, in world: inout SimulationWorld<Self>)
  /// The app of device `index` is being launched: restore what the domain persisted (before the engine's
  /// load, whose first steps the domain follows).
  static func launching(_ index: Int, in world: inout SimulationWorld<Self>)
  /// The app of device `index` was launched from what it persisted (after the engine's load).
  static func launched(_ index: Int, in world: inout SimulationWorld<Self>)
  /// The server's pending records were made durable.
  static func serverCommitted(in world: inout SimulationWorld<Self>)
  /// Whether device `index`, on screen, shows something its user would see as wrong next to the server's
  /// current snapshot.
  static func showsWrong(_ index: Int, server: Application.Snapshot, in world: SimulationWorld<Self>) -> Bool
  /// What keeps the domain's part of the world from having converged (empty once it has).
  static func convergenceGaps(in world: SimulationWorld<Self>) -> [String]
  /// The world starts, its devices loaded: schedule the domain's own first happenings.
  static func worldStarts(in world: inout SimulationWorld<Self>)
  /// The world ended: the domain's checks of the final state (they add to `world.violations`).
  static func finalChecks(in world: inout SimulationWorld<Self>)
  /// The domain's figures for the report: actions that were saved, and those that reached their end.
  static func outcomes(in world: SimulationWorld<Self>) -> (made: Int, completed: Int)
}

extension SimulatedDomain {
  static func deviceCount(ofUser user: Int, in world: WorldState, scenario: Scenario) -> Int {
    scenario.devicesPerUser
  }
  static func worldStarts(in world: inout SimulationWorld<Self>) {}
  static func finalChecks(in world: inout SimulationWorld<Self>) {}
  static func wholePart(of snapshot: Application.Snapshot) -> Application.Snapshot { snapshot }
  static func device(of happening: Happening) -> Int? { nil }
  static func handle(_ happening: Happening, in world: inout SimulationWorld<Self>) {}
  static func appOpened(_ index: Int, in world: inout SimulationWorld<Self>) {}
  static func engineChanged(_ index: Int, in world: inout SimulationWorld<Self>) {}
  static func networkChanged(_ index: Int, online: Bool, in world: inout SimulationWorld<Self>) {}
  static func timerFired(_ index: Int, in world: inout SimulationWorld<Self>) {}
  static func nextWakeUp(_ index: Int, in world: SimulationWorld<Self>) -> Timestamp? { nil }
  static func saved(_ index: Int, in world: inout SimulationWorld<Self>) {}
  static func killing(_ index: Int, in world: inout SimulationWorld<Self>) {}
  static func launching(_ index: Int, in world: inout SimulationWorld<Self>) {}
  static func launched(_ index: Int, in world: inout SimulationWorld<Self>) {}
  static func serverCommitted(in world: inout SimulationWorld<Self>) {}
  static func convergenceGaps(in world: SimulationWorld<Self>) -> [String] { [] }
}
