import EpisodeQueue
import EventProtocol
import EventServer
import Foundation
import UpdateMachine

/// The episode queue in the simulated world: listeners with 1–4 devices each, a broadcaster publishing,
/// editing and unpublishing on a schedule, and the engine faults of ``FaultRates`` (latency, lost requests
/// and answers, requests never answered, offline periods, app kills, server restarts with and without a
/// dump), every body through the JSON wire format. Deterministic for a seed.
///
/// It checks, as it runs: every batch a device applies leaves it at a projection its user actually had on
/// the server (the convergence law at every delivered batch); every download starts from state the server
/// confirmed this session, for an episode queued and available there; `metaVersion` never goes back on a
/// device. At the end, after the faults stop: every device equals its user's projection with an empty
/// outbox, no (episode, media version) was downloaded twice on a device, no file is kept of an episode not
/// queued and available, and no finished or dismissed episode came back without a current basis.
///
/// ```swift
/// let report = EpisodeSimulation.run(EpisodeSimulation.Scenario(seed: 7))
/// print(report.violations)  // [] when every invariant held
/// ```
public enum EpisodeSimulation {
  /// What to simulate.
  public struct Scenario: Sendable, Hashable {
    /// Drives every choice: the same seed replays the same run.
    public var seed: UInt64
    /// The listeners.
    public var users = 2
    /// How many devices each listener has (drawn per listener).
    public var devicesPerUser: ClosedRange<Int> = 1...4
    /// How long the faults last; then the world must settle.
    public var duration: Duration = .seconds(3 * 3600)
    /// The faults.
    public var faults = FaultRates()
    /// Server nodes. One: a durable server with its own log, restarted and crashed by the faults. More: a
    /// cluster of replicas of one shared log (`EventServer.joining`), where each request goes to a node
    /// drawn at random (clients move between nodes) and the server faults kill one node at a time, which
    /// starts again from the log.
    public var nodes = 1
    /// With several nodes: the users' partitions, each served by one node under a lease (`nil`: none; see
    /// the shared ``Simulation/Scenario/partitions``).
    public var partitions: Int?

    /// A scenario with the defaults.
    public init(seed: UInt64) {
      self.seed = seed
    }
  }

  /// What happened.
  public struct Report: Sendable {
    /// Every invariant that broke, with when; empty when all held.
    public var violations: [String]
    /// Whether every device settled on its user's projection.
    public var converged: Bool
    /// How many devices there were.
    public var devices: Int
    /// How many commands the listeners and the broadcaster sent.
    public var commands: Int
    /// How many batches devices applied (each checked against the user's history of projections).
    public var batchesChecked: Int
    /// How many downloads started (each checked).
    public var downloadsStarted: Int
    /// How many times a device registered again (expired or lost queues).
    public var reRegistrations: Int
    /// How many cluster nodes were killed (0 with one node).
    public var nodeKills = 0
    /// How many times a node took a partition's lease (0 without partitions).
    public var partitionsTaken = 0
    /// How many times a partition went to another node than the one that held it last.
    public var partitionMoves = 0
    /// The shared world's report of the run: its costs, freshness and moments.
    public var simulation: SimulationReport
  }

  /// Runs `scenario` to the end, in the world every domain shares (`EpisodeDomain`): listeners act at
  /// the moments their scripts give while their app is open, on a desktop-like platform (an app off
  /// screen keeps running, polling in the background), with pushes and long-polls (push+poll).
  public static func run(_ scenario: Scenario) -> Report {
    let shared = scenario.sharedWorld
    var world = SimulationWorld<EpisodeDomain>(
      scenario: shared,
      domain: EpisodeDomain.makeWorldState(scenario: shared, devicesPerUser: scenario.devicesPerUser)
    )
    let report = world.run()
    var violations = world.violations
    if world.settledAt == nil {
      violations.append("the world did not settle within \(Int(shared.settleLimit.inSeconds)) s of the faults' end")
    }
    return Report(
      violations: violations,
      converged: world.settledAt != nil,
      devices: world.devices.count,
      commands: world.domain.commands,
      batchesChecked: world.batchesApplied,
      downloadsStarted: world.domain.downloadsStarted,
      reRegistrations: world.devices.reduce(0) { $0 + max($1.registrations - 1, 0) },
      nodeKills: world.cluster?.kills ?? 0,
      partitionsTaken: world.leases?.takes ?? 0,
      partitionMoves: world.leases?.moves ?? 0,
      simulation: report
    )
  }
}

extension EpisodeSimulation.Scenario {
  /// The shared world's scenario: listeners who keep the app open most of the time (about three quarters)
  /// and act every seven to eight minutes while it is, on a desktop-like platform.
  var sharedWorld: Scenario {
    var shared = Scenario(seed: seed)
    shared.users = users
    shared.duration = duration
    shared.settleLimit = .seconds(6 * 3600)
    shared.faults = faults
    shared.nodes = nodes
    shared.partitions = partitions
    shared.platform = .desktop
    shared.strategy = .pushPlusPoll
    shared.queueLifespan = .seconds(3600)
    shared.behaviour.opensPerHour = 2
    shared.behaviour.openSeconds = 1200...3600
    shared.behaviour.recordingsPerOpenHour = 16
    return shared
  }
}
