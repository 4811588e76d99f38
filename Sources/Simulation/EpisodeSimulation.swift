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
  }

  /// Runs `scenario` to the end.
  public static func run(_ scenario: Scenario) -> Report {
    var world = EpisodeWorld(scenario: scenario)
    return world.run()
  }
}
