import EpisodeQueue
import EventProtocol
import EventServer
import UpdateMachine
import UpdateMachineTesting

/// `swift run Demo --scenario episodes`: a listener's phone and tablet share a podcast queue; the tablet
/// spends a month in a drawer holding stale writes while the phone finishes, dismisses and fetches and the
/// broadcaster edits and unpublishes; then the tablet comes back. It must converge without resurrecting or
/// re-downloading anything. Runs on the real engine cores against the server core, deterministically.
struct EpisodesDemo {
  typealias World = LoopbackWorld<EpisodeServer, EpisodeReducer>

  let seed: UInt64
  private(set) var lines: [String] = []

  init(seed: UInt64) {
    self.seed = seed
  }

  /// What every check found; the demo fails when any is false.
  struct Checks {
    var results: [(String, Bool)] = []
    var allHold: Bool { results.allSatisfy(\.1) }
  }

  mutating func run() -> Checks {
    var configuration = UpdateMachineConfiguration()
    configuration.queueLifespan = .seconds(24 * 3600)
    var world = World(
      application: EpisodeServer(admins: ["kpcc"]),
      reducer: { _ in EpisodeReducer() },
      devices: ["ann", "ann"],
      seed: seed,
      configuration: configuration,
      faults: .none
    )
    var downloads = [EpisodeDownloads(keep: 10), EpisodeDownloads(keep: 10)]
    var startedFromStale = 0
    var downloadLog: [String] = []
    let names = ["phone", "tablet"]

    func sync(_ index: Int, _ world: World, _ downloads: inout [EpisodeDownloads]) -> [String] {
      let core = world.devices[index].core
      guard let confirmed = core.confirmedState else { return [] }
      var done: [String] = []
      for action in downloads[index].update(
        confirmed: confirmed,
        isConfirmedThisSession: core.isConfirmedThisSession,
        pending: core.pendingMutations.map(\.mutation)
      ) {
        switch action {
        case .start(let episode, let version, _):
          if !core.isConfirmedThisSession { startedFromStale += 1 }
          downloads[index].downloadFinished(episode, mediaVersion: version)
          done.append("\(names[index]) downloads \(episode) (media v\(version))")
        case .cancel(let episode): done.append("\(names[index]) cancels \(episode)")
        case .delete(let episode): done.append("\(names[index]) deletes its file of \(episode)")
        }
      }
      return done
    }
    func settle(_ online: Set<Int>, _ world: inout World, _ downloads: inout [EpisodeDownloads]) -> Bool {
      let settled = world.runUntilSettled(online: online, maximumSteps: 50_000)
      for index in online.sorted() { downloadLog += sync(index, world, &downloads) }
      return settled
    }
    func publish(_ id: String, _ show: ShowID, hoursAgo: Double, _ world: inout World) {
      let meta = EpisodeMeta(
        show: show,
        title: "\(show): \(id)",
        url: "https://media.example/\(id).mp3",
        publishedAt: world.now.advanced(by: .seconds(-hoursAgo * 3600))
      )
      try? world.serverCommand(.admin(.publish(EpisodeID(rawValue: id), meta)), from: "kpcc")
    }
    func queue(_ index: Int, _ world: World) -> String {
      let queue = world.devices[index].core.confirmedState?.queue.map(\.episode.rawValue) ?? []
      return queue.isEmpty ? "(empty)" : queue.joined(separator: ", ")
    }

    say("Day 0. Ann favorites two shows on her phone (n = 3); both devices are online.")
    for (index, id) in ["air-1", "air-2", "air-3", "air-4"].enumerated() {
      publish(id, "airtalk", hoursAgo: Double(48 - index * 10), &world)
    }
    for (index, id) in ["brief-1", "brief-2"].enumerated() {
      publish(id, "brief", hoursAgo: Double(30 - index * 10), &world)
    }
    world.submit(.setSettings(EpisodeSettings(n: 3)), on: 0)
    world.submit(.favorite("airtalk"), on: 0)
    world.submit(.favorite("brief"), on: 0)
    world.submit(.fetchNew(shows: nil), on: 0)
    var settledAll = settle([0, 1], &world, &downloads)
    say("  phone queue:  \(queue(0, world))")
    say("  tablet queue: \(queue(1, world))")
    world.submit(.dismiss("brief-1", at: world.now), on: 0)
    settledAll = settle([0, 1], &world, &downloads) && settledAll
    let staleBasis = (world.devices[1].core.confirmedState?.terminal("brief-1")?.terminalRev ?? 1) - 1
    flushDownloads(&downloadLog)

    say("Day 0, evening. The tablet goes into a drawer, offline, holding two writes in its outbox:")
    say("  a position of 10:00 in air-4, and \"play again\" for brief-1 quoting a basis from before its dismissal.")
    world.submit(.updatePosition("air-4", seconds: 600, at: world.now, device: "tablet"), on: 1)
    world.submit(.enqueue("brief-1", .top, basis: staleBasis), on: 1)

    say("Days 1-31. On the phone: air-4 finished, air-3 dismissed, a fetch every week; the broadcaster publishes,")
    say("  renames air-2 and unpublishes brief-2.")
    for week in 0..<4 {
      world.advance(to: world.now.advanced(by: .seconds(7 * 24 * 3600)))
      publish("air-w\(week + 1)", "airtalk", hoursAgo: 2, &world)
      if week == 0 {
        world.submit(.markFinished("air-4", at: world.now), on: 0)
        world.submit(.dismiss("air-3", at: world.now), on: 0)
      }
      if week == 1 {
        try? world.serverCommand(
          .admin(
            .editMeta(
              "air-2",
              title: "AirTalk: the interview (corrected)",
              url: "https://media.example/air-2.mp3",
              newMedia: false
            )
          ),
          from: "kpcc"
        )
      }
      if week == 2 { try? world.serverCommand(.admin(.unpublish("brief-2")), from: "kpcc") }
      world.submit(.fetchNew(shows: nil), on: 0)
      settledAll = settle([0], &world, &downloads) && settledAll
    }
    world.advance(to: world.now.advanced(by: .seconds(3 * 24 * 3600)))
    say("  phone queue after a month: \(queue(0, world))")
    flushDownloads(&downloadLog)

    say("Day 31. The tablet comes out of the drawer and restarts, its queue on the server long expired.")
    world.crash(1)
    downloads[1].restarted()
    let staleStarts = sync(1, world, &downloads).filter { $0.contains("downloads") }
    say("  before it reaches the server: \(staleStarts.count) downloads started (its month-old state is not trusted)")
    settledAll = settle([0, 1], &world, &downloads) && settledAll
    say("  tablet queue:  \(queue(1, world))  (it registered again: its queue had expired)")
    flushDownloads(&downloadLog)
    let server = world.server.application
    for line in server.superseded.suffix(2) { say("  superseded: \(line)") }

    var checks = Checks()
    let projection = server.snapshot(for: "ann")
    checks.results.append(
      ("both devices converged", settledAll && world.devices.allSatisfy { $0.core.confirmedState == projection })
    )
    checks.results.append(("both outboxes empty", world.devices.allSatisfy { $0.core.pendingMutations.isEmpty }))
    checks.results.append(
      (
        "air-4 stays finished and brief-1 stays dismissed (the stale writes were superseded)",
        projection.terminal("air-4")?.finished == true && projection.terminal("brief-1") != nil
      )
    )
    checks.results.append(
      (
        "no restoration without a basis at its terminal revision",
        server.restorations.allSatisfy { $0.basis >= $0.terminalRev }
      )
    )
    checks.results.append(("no download started from stale state", startedFromStale == 0 && staleStarts.isEmpty))
    checks.results.append(
      (
        "no episode downloaded twice on a device",
        downloads.allSatisfy { $0.completedCount.values.allSatisfy { $0 == 1 } }
      )
    )
    checks.results.append(
      (
        "the tablet keeps files only of queued, available episodes",
        downloads[1].files.keys.allSatisfy { episode in
          projection.queued(episode) != nil && projection.meta[episode]?.available == true
        }
      )
    )
    checks.results.append(
      (
        "the rename reached the tablet without a download",
        projection.meta["air-2"]?.title.contains("corrected") == true
          && world.devices[1].core.confirmedState?.meta["air-2"]?.title == projection.meta["air-2"]?.title
      )
    )
    say("Checked:")
    for (name, holds) in checks.results { say("  \(holds ? "✓" : "✗") \(name)") }
    return checks
  }

  private mutating func flushDownloads(_ log: inout [String]) {
    for line in log { say("  \(line)") }
    log = []
  }

  private mutating func say(_ line: String) {
    lines.append(line)
  }
}
