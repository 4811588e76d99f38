import EpisodeQueue
import EventProtocol
import EventServer
import UpdateMachine

/// The podcast episode queue as a domain of the simulated world: the episode server and reducer, each
/// device's download manager beside its engine, listeners acting at the moments their scripts give, and a
/// broadcaster publishing, editing and unpublishing on the world's clock.
///
/// Its invariants, beside the world's own (every state a device confirms is one its user had on the
/// server, checked at every step): a download starts only from state the server confirmed this session,
/// for an episode queued and available there and not finished or dismissed on the device; `metaVersion`
/// never goes back on a device; at the end no (episode, media version) was downloaded twice on a device,
/// no file is kept of an episode not queued and available, and no finished or dismissed episode came back
/// without a current basis.
enum EpisodeDomain: SimulatedDomain {
  typealias Application = EpisodeServer
  typealias Reducer = EpisodeReducer

  static let broadcaster: UserID = "broadcaster"
  static let shows: [ShowID] = ["airtalk", "brief", "weekly"]

  /// The domain's draws and figures.
  struct WorldState {
    /// The listeners' and the broadcaster's choices, apart from every other stream.
    var random: SeededRandomNumberGenerator
    /// How many devices each listener has.
    var deviceCounts: [Int]
    var nextEpisode = 0
    /// Commands the listeners and the broadcaster sent.
    var commands = 0
    var downloadsStarted = 0
  }

  /// The download manager beside a device's engine, and the highest metadata version it has shown.
  struct DeviceState {
    var downloads = EpisodeDownloads(keep: 5)
    var highestMeta: [EpisodeID: Int] = [:]
  }

  enum Happening {
    /// The broadcaster publishes, edits or unpublishes.
    case broadcasterActs
  }

  /// The world's state at the start of `scenario`, each listener with `devicesPerUser` devices (drawn).
  static func makeWorldState(scenario: Scenario, devicesPerUser: ClosedRange<Int>) -> WorldState {
    var random = RandomStream.domain.generator(seed: scenario.seed)
    let counts = (0..<max(scenario.users, 1)).map { _ in Int.random(in: devicesPerUser, using: &random) }
    return WorldState(random: random, deviceCounts: counts)
  }

  static func makeApplication(in world: WorldState) -> EpisodeServer { EpisodeServer(admins: [broadcaster]) }

  static func makeReducer(for user: UserID, in world: WorldState) -> EpisodeReducer { EpisodeReducer() }

  static func deviceCount(ofUser user: Int, in world: WorldState, scenario: Scenario) -> Int {
    world.deviceCounts[user]
  }

  static func makeDeviceState(device index: Int, epoch: Int, scenario: Scenario) -> DeviceState { DeviceState() }

  static func worldStarts(in world: inout SimulationWorld<Self>) {
    for index in 0..<6 {
      world.publish(show: shows[index % shows.count], hoursAgo: Double(6 - index))
    }
    world.schedule(.domain(.broadcasterActs), after: .seconds(300))
  }

  static func handle(_ happening: Happening, in world: inout SimulationWorld<Self>) {
    switch happening {
    case .broadcasterActs:
      guard world.faultsOn else { return }
      world.broadcasterActs()
      world.schedule(
        .domain(.broadcasterActs),
        after: .seconds(Int64.random(in: 300...1800, using: &world.domain.random))
      )
    }
  }

  static func userActs(_ index: Int, _ planned: DeviceScript.Recording, in world: inout SimulationWorld<Self>) {
    world.listenerActs(index)
  }

  static func engineChanged(_ index: Int, in world: inout SimulationWorld<Self>) {
    world.followDownloads(index)
  }

  static func launching(_ index: Int, in world: inout SimulationWorld<Self>) {
    world.devices[index].extra.downloads.restarted()
  }

  /// A listener sees a queue the server has moved past.
  static func showsWrong(_ index: Int, server: EpisodeProjection, in world: SimulationWorld<Self>) -> Bool {
    guard let confirmed = world.devices[index].confirmedState else { return false }
    return confirmed.queue != server.queue
  }

  static func finalChecks(in world: inout SimulationWorld<Self>) {
    let application = world.server.application
    for device in world.devices {
      let projection = application.snapshot(for: device.user)
      for episode in device.extra.downloads.files.keys
      where projection.queued(episode) == nil || projection.meta[episode]?.available != true {
        world.violations.append("device \(device.index) keeps a file of \(episode), not queued and available")
      }
      if device.extra.downloads.completedCount.values.contains(where: { $0 > 1 }) {
        world.violations.append("device \(device.index) downloaded an episode twice")
      }
    }
    for restoration in application.restorations where restoration.basis < restoration.terminalRev {
      world.violations.append(
        "\(restoration.user) got \(restoration.episode) back with basis \(restoration.basis) < \(restoration.terminalRev)"
      )
    }
  }

  static func outcomes(in world: SimulationWorld<Self>) -> (made: Int, completed: Int) {
    (world.domain.commands, world.domain.commands)
  }
}
