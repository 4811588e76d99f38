import EpisodeQueue
import EventProtocol
import EventServer
import TestScheduling
import Testing
import UpdateMachine
import UpdateMachineTesting

/// The randomized run of docs/episode-queue.md §5: two users with 1–4 devices each, the broadcaster
/// publishing, editing and unpublishing, and every engine fault (lost requests and answers, crashes between
/// actions, failed saves, server restarts, background and pushes), checked step by step and at the end.
@Suite("EpisodeQueue randomized: devices, broadcaster churn and engine faults", .serialized)
struct EpisodeQueueSimulationTests {
  @Test(
    "200 seeds (1,000 in a full run): converged, nothing resurrected, nothing downloaded from stale state",
    .cpuBound,
    arguments: TestSeeds.first(200, of: 1_000) as Range<UInt64>
  )
  func randomized(seed: UInt64) {
    var random = SeededRandomNumberGenerator(seed: seed)
    let users: [UserID] = ["ann", "vic"]
    let devices = users.flatMap { user in Array(repeating: user, count: Int.random(in: 1...4, using: &random)) }
    var world = Listeners(devices, seed: seed, faults: .init())
    for (index, episode) in RandomEpisodeCommands.episodes.prefix(3).enumerated() {
      world.publish(episode, RandomEpisodeCommands.shows[index % 2], hoursAgo: Double(index + 1))
    }
    var highestMeta: [[EpisodeID: Int]] = Array(repeating: [:], count: devices.count)
    for _ in 0..<150 {
      switch Int.random(in: 0..<10, using: &random) {
      case 0..<3:
        let index = Int.random(in: devices.indices, using: &random)
        var (_, command) = RandomEpisodeCommands.command(using: &random)
        if case .admin = command { command = .fetchNew(shows: nil) }
        if case .enqueue(let episode, let placement, _) = command, Bool.random(using: &random) {
          // "Play again" quoting the basis this device saw.
          let basis = world.confirmed(index).terminal(episode)?.terminalRev
          command = .enqueue(episode, placement, basis: basis)
        }
        world.world.submit(command, on: index)
      case 3 where Int.random(in: 0..<3, using: &random) == 0:
        let (_, command) = RandomEpisodeCommands.command(using: &random)
        if case .admin(let admin) = command { try? world.world.serverCommand(.admin(admin), from: kpcc) }
      case 4:
        let index = Int.random(in: devices.indices, using: &random)
        world.syncDownloads(index)
      default:
        world.world.chaoticStep()
      }
      for index in devices.indices {
        for (episode, meta) in world.confirmed(index).meta {
          #expect(meta.metaVersion >= highestMeta[index][episode] ?? 0, "seed \(seed): metaVersion went back")
          highestMeta[index][episode] = meta.metaVersion
        }
      }
    }
    world.settle()
    let server = world.world.server.application
    for (index, user) in devices.enumerated() {
      let confirmed = world.confirmed(index)
      #expect(confirmed == server.snapshot(for: user), "seed \(seed): device \(index) did not converge")
      #expect(world.world.devices[index].core.pendingMutations.isEmpty)
      let queued = confirmed.queue.map(\.episode)
      #expect(Set(queued).count == queued.count && queued.allSatisfy { confirmed.terminal($0) == nil })
      let sorted = confirmed.queue.sorted { ($0.key, $0.episode) < ($1.key, $1.episode) }
      #expect(confirmed.queue == sorted)
      // Files only of episodes queued and available; no (episode, media version) completed twice.
      for episode in world.downloads[index].files.keys {
        #expect(queued.contains(episode) && confirmed.meta[episode]?.available == true, "seed \(seed): stale file")
      }
      #expect(world.downloads[index].completedCount.values.allSatisfy { $0 == 1 }, "seed \(seed): downloaded twice")
    }
    // Every download started from state confirmed this session.
    #expect(world.started.allSatisfy { $0.confirmed }, "seed \(seed): a download started from stale state")
    // No resurrection: terminal → queued only through an enqueue whose basis reached the terminal revision.
    #expect(server.restorations.allSatisfy { $0.basis >= $0.terminalRev })
  }
}
