import EventProtocol
import Simulation
import TestScheduling
import Testing

/// The fault mixes the property test cycles through.
private let faultMixes: [(String, FaultRates)] = [
  ("none", .none),
  ("moderate", FaultRates()),
  ("heavy", FaultRates().scaled(by: 3)),
  (
    "push storm",
    {
      var rates = FaultRates()
      rates.pushLoss = 0.8
      rates.pushLate = 0.5
      rates.pushDuplicate = 0.3
      return rates
    }()
  ),
  (
    "crashes and restarts",
    {
      var rates = FaultRates()
      rates.crashesPerHour = 4
      rates.serverRestartsPerHour = 2
      rates.restartIsCrash = 0.5
      return rates
    }()
  ),
]

/// The small scenario seed `seed` runs: its strategy, fault mix, users and devices all follow from it.
private func scenario(seed: UInt64) -> (Scenario, String) {
  var scenario = Scenario(seed: seed)
  scenario.users = 2 + Int(seed % 2)
  scenario.devicesPerUser = 1 + Int(seed / 2 % 2)
  scenario.duration = .seconds(30 * 60)
  scenario.strategy = DeliveryStrategy.allCases[Int(seed % 4)]
  let (name, rates) = faultMixes[Int(seed / 4 % UInt64(faultMixes.count))]
  scenario.faults = rates
  return (scenario, name)
}

/// Serialized: 2,000 synchronous runs would otherwise take every thread of the cooperative pool and starve the
/// asynchronous tests running beside them.
@Suite("Simulation: every invariant holds and every device converges, over thousands of schedules", .serialized)
struct SimulationPropertyTests {
  @Test(
    "400 seeds (2,000 in a full run) across strategies and fault mixes converge with every invariant held",
    .cpuBound,
    arguments: TestSeeds.first(400, of: 2_000) as Range<UInt64>
  )
  func converges(seed: UInt64) {
    let (scenario, mix) = scenario(seed: seed)
    let report = Simulation.run(scenario)
    #expect(
      report.converged,
      """
      seed \(seed) (\(scenario.strategy), \(mix), \(scenario.users) users × \(scenario.devicesPerUser) devices): \
      violations \(report.violations), gaps \(report.convergenceGaps); \
      replay with Simulation.run on this scenario, or `swift run Demo --seed \(seed) --strategy \(scenario.strategy)`
      """
    )
  }
}

@Suite("Simulation: deterministic, and the seed's argument measured")
struct SimulationBehaviourTests {
  @Test(
    "videos on 3 nodes and 8 partitions, nodes killed: every user served by its partition's holder, all converge",
    .cpuBound,
    arguments: TestSeeds.first(10, of: 30) as Range<UInt64>
  )
  func partitionedCluster(seed: UInt64) {
    var scenario = Scenario(seed: seed)
    scenario.duration = .seconds(2 * 3600)
    scenario.nodes = 3
    scenario.partitions = 8
    scenario.faults.serverRestartsPerHour = 4
    let report = Simulation.run(scenario)
    #expect(report.violations.isEmpty, "seed \(seed): \(report.violations.prefix(3))")
    #expect(report.converged, "seed \(seed): \(report.convergenceGaps.prefix(3))")
  }

  @Test("the same seed gives the same run, trace and all")
  func deterministic() {
    var scenario = Scenario(seed: 77)
    scenario.duration = .seconds(2 * 3600)
    scenario.keepsFullTrace = true
    let first = Simulation.run(scenario)
    #expect(first == Simulation.run(scenario))
    #expect(first.trace.count > 100)
    var other = scenario
    other.seed = 78
    #expect(Simulation.run(other).trace != first.trace)
  }

  @Test(
    "with pushes lost, push-only leaves a sender looking at a wrong status for minutes; push+poll does not"
  )
  func pushOnlyShowsWrongStatus() {
    var longestPushOnly: [Double] = []
    for seed in 0..<5 as Range<UInt64> {
      var scenario = Scenario(seed: seed)
      var faults = FaultRates.none
      faults.latencyMilliseconds = 20...300
      faults.pushLoss = 0.5
      scenario.faults = faults
      scenario.duration = .seconds(4 * 3600)
      scenario.strategy = .pushOnly
      let pushOnly = Simulation.run(scenario)
      scenario.strategy = .pushPlusPoll
      let pushPlusPoll = Simulation.run(scenario)
      #expect(pushOnly.converged && pushPlusPoll.converged)
      #expect(
        pushOnly.longestWrongStatusSeconds > 10 * max(pushPlusPoll.longestWrongStatusSeconds, 1),
        "seed \(seed): push-only \(pushOnly.longestWrongStatusSeconds) s"
      )
      #expect(pushPlusPoll.longestWrongStatusSeconds < 5, "push+poll: \(pushPlusPoll.longestWrongStatusSeconds) s")
      #expect(pushOnly.wrongStatusSecondsPerOpenHour > 10 * max(pushPlusPoll.wrongStatusSecondsPerOpenHour, 0.1))
      longestPushOnly.append(pushOnly.longestWrongStatusSeconds)
    }
    // Minutes in most runs (how long depends on which pushes a run loses: 20 s to 8 minutes over these seeds).
    #expect(longestPushOnly.sorted()[2] > 60, "push-only longest wrong status per seed: \(longestPushOnly)")
  }

  @Test("pushes that carry events are applied with no request; poll-only sends no push at all")
  func strategiesDiffer() {
    var scenario = Scenario(seed: 5)
    scenario.faults = .none
    scenario.duration = .seconds(3 * 3600)
    scenario.strategy = .pushPlusPollPayload
    #expect(Simulation.run(scenario).pushesAppliedWithoutRequest > 0)
    scenario.strategy = .pushPlusPoll
    #expect(Simulation.run(scenario).pushesAppliedWithoutRequest == 0)
    scenario.strategy = .pollOnly
    #expect(Simulation.run(scenario).pushesSent == 0)
  }
}

/// The video app's second, ephemeral machine: what its own long-poll costs, and what one queue for both
/// machines would leave.
@Suite("Simulation: the presence machine's cost")
struct PresenceSimulationTests {
  @Test("a run replays exactly from its seed; the parked-poll time follows the time apps are open")
  func presenceCost() {
    var scenario = PresenceSimulation.Scenario()
    scenario.hours = 2
    let report = PresenceSimulation.run(scenario)
    #expect(report == PresenceSimulation.run(scenario))
    // A long-poll is parked whenever the app is open and not answering: within a few percent of open time.
    let openSeconds = report.openShare * 3600
    #expect(abs(report.parkedSecondsPerDeviceHour - openSeconds) < openSeconds * 0.05)
    // Heartbeats every 45-55 s while open: the empty polls.
    #expect(report.emptyPollsPerDeviceHour > openSeconds / 60 && report.emptyPollsPerDeviceHour < openSeconds / 40)
    #expect(report.registersPerDeviceHour > 0 && report.writesPerDeviceHour > 0)
    #expect(report.sharedQueueRequestsPerDeviceHour < report.requestsPerDeviceHour / 3)
  }
}

/// Users browse conversation histories (pages fetched and kept live) in the simulated world, under every
/// fault: no known item may differ from the server's at the device's finger, at any step.
@Suite("Simulation: conversation histories under faults", .serialized)
struct HistorySimulationTests {
  @Test(
    "40 seeds (200 in a full run) browsing histories converge; no known item ever differs from the server",
    .cpuBound,
    arguments: TestSeeds.first(40, of: 200) as Range<UInt64>
  )
  func historiesHold(seed: UInt64) {
    var scenario = Scenario(seed: seed)
    scenario.users = 2 + Int(seed % 3)
    scenario.devicesPerUser = 1 + Int(seed % 2)
    scenario.duration = .seconds(3600)
    scenario.behaviour.historyPagesPerOpen = 2
    scenario.behaviour.recordingsPerOpenHour = 12
    if seed % 3 == 0 { scenario.faults = FaultRates().scaled(by: 3) }
    let report = Simulation.run(scenario)
    #expect(
      report.converged,
      "seed \(seed): violations \(report.violations.prefix(3)), gaps \(report.convergenceGaps.prefix(3))"
    )
    #expect(report.historyPagesMerged > 0, "seed \(seed): no page was merged")
  }
}
