import EpisodeQueue
import EventProtocol
import EventServer
import Foundation
import Testing
import UpdateMachine
import UpdateMachineTesting

let t0 = Timestamp(secondsSinceEpoch: 1_700_000_000)
let kpcc: UserID = "kpcc"

/// The server application alone, driven command by command at a clock the test moves.
struct Desk {
  var server = EpisodeServer(admins: [kpcc])
  var now = t0
  var delivered: [UserID: [EpisodeEvent]] = [:]

  /// Publishes `id` in `show`, dated `hoursAgo` before now (negative: in the future, scheduled).
  mutating func publish(_ id: EpisodeID, _ show: ShowID, hoursAgo: Double = 1, title: String? = nil) {
    let meta = EpisodeMeta(
      show: show,
      title: title ?? "\(show) \(id)",
      url: "https://media.example/\(id).mp3",
      publishedAt: now.advanced(by: .seconds(-hoursAgo * 3600))
    )
    run(.admin(.publish(id, meta)), from: kpcc)
  }

  @discardableResult
  mutating func run(_ command: EpisodeCommand, from user: UserID) -> [Delivery<EpisodeEvent>] {
    do {
      let deliveries = try server.handle(command, from: user, at: now)
      for delivery in deliveries {
        for recipient in Set(delivery.recipients) { delivered[recipient, default: []].append(delivery.event) }
      }
      return deliveries
    } catch {
      fatalError("refused: \(error)")
    }
  }

  mutating func advance(_ duration: Duration) { now = now.advanced(by: duration) }

  func projection(_ user: UserID) -> EpisodeProjection { server.snapshot(for: user) }

  func queue(_ user: UserID) -> [EpisodeID] { projection(user).queue.map(\.episode) }

  func rev(of episode: EpisodeID, _ user: UserID) -> Int? {
    let projection = projection(user)
    return projection.queued(episode)?.rev ?? projection.terminal(episode)?.terminalRev
  }
}

/// Devices of users on the real engine cores against the server core (LoopbackWorld), each with its own
/// downloads, downloading what the download manager starts at once.
struct Listeners {
  var world: LoopbackWorld<EpisodeServer, EpisodeReducer>
  var downloads: [EpisodeDownloads]
  /// Every download started, as (device, episode, whether the device's state was confirmed this session).
  var started: [(device: Int, episode: EpisodeID, confirmed: Bool)] = []
  /// Episodes whose downloads are held (not finished) until released.
  var holding: Set<EpisodeID> = []

  init(
    _ users: [UserID],
    seed: UInt64 = 1,
    faults: LoopbackWorld<EpisodeServer, EpisodeReducer>.Faults = .none,
    server: EventServerConfiguration = .init()
  ) {
    var configuration = UpdateMachineConfiguration()
    configuration.queueLifespan = .seconds(24 * 3600)
    world = LoopbackWorld(
      application: EpisodeServer(admins: [kpcc]),
      reducer: { _ in EpisodeReducer() },
      devices: users,
      seed: seed,
      configuration: configuration,
      faults: faults,
      serverConfiguration: server
    )
    downloads = users.map { _ in EpisodeDownloads(keep: 10) }
  }

  var now: Timestamp { world.now }

  mutating func publish(_ id: EpisodeID, _ show: ShowID, hoursAgo: Double = 1) {
    let meta = EpisodeMeta(
      show: show,
      title: "\(show) \(id)",
      url: "https://media.example/\(id).mp3",
      publishedAt: world.now.advanced(by: .seconds(-hoursAgo * 3600))
    )
    admin(.publish(id, meta))
  }

  mutating func admin(_ command: AdminCommand) {
    do {
      try world.serverCommand(.admin(command), from: kpcc)
    } catch {
      fatalError("admin command refused: \(error)")
    }
  }

  /// Settles the online devices, then lets each run its downloads to a fixed point.
  @discardableResult
  mutating func settle(online: Set<Int>? = nil) -> Bool {
    let online = online ?? Set(world.devices.indices)
    let settled = world.runUntilSettled(online: online, maximumSteps: 20_000)
    if !settled {
      Issue.record("devices \(online.sorted()) did not settle:\n\(world.trace.suffix(20).joined(separator: "\n"))")
    }
    for index in online { syncDownloads(index) }
    return settled
  }

  /// Runs device `index`'s download manager on its confirmed state.
  mutating func syncDownloads(_ index: Int) {
    let core = world.devices[index].core
    guard let confirmed = core.confirmedState else { return }
    let actions = downloads[index].update(
      confirmed: confirmed,
      isConfirmedThisSession: core.isConfirmedThisSession,
      pending: core.pendingMutations.map(\.mutation)
    )
    for action in actions {
      guard case .start(let episode, let version, _) = action else { continue }
      started.append((index, episode, core.isConfirmedThisSession))
      if !holding.contains(episode) { downloads[index].downloadFinished(episode, mediaVersion: version) }
    }
  }

  func confirmed(_ index: Int) -> EpisodeProjection { world.devices[index].core.confirmedState ?? EpisodeProjection() }

  func queue(_ index: Int) -> [EpisodeID] { confirmed(index).queue.map(\.episode) }

  func snapshot(_ user: UserID) -> EpisodeProjection { world.server.application.snapshot(for: user) }
}
