import EventProtocol
import Foundation
import Simulation
import TestScheduling
import Testing

/// docs/episode-queue.md §5's randomized simulation, on the Simulation library.
@Suite("The episode queue in the simulated world", .serialized)
struct EpisodeSimulationTests {
  @Test(
    "200 seeds (1,000 in a full run): 1-4 devices per listener, broadcaster churn, every fault; every invariant holds",
    .cpuBound,
    arguments: TestSeeds.first(200, of: 1_000) as Range<UInt64>
  )
  func seeds(seed: UInt64) {
    var scenario = EpisodeSimulation.Scenario(seed: seed)
    scenario.duration = .seconds(3600)
    let report = EpisodeSimulation.run(scenario)
    #expect(report.violations.isEmpty, "seed \(seed): \(report.violations.prefix(5))")
    #expect(report.converged)
    #expect(report.batchesChecked > 0 && report.commands > 0)
  }

  @Test(
    "40 seeds (200 in a full run) on a cluster of 3 nodes: requests go to any node, nodes are killed; every invariant holds",
    .cpuBound,
    arguments: TestSeeds.first(40, of: 200) as Range<UInt64>
  )
  func clusterSeeds(seed: UInt64) {
    var scenario = EpisodeSimulation.Scenario(seed: seed)
    scenario.duration = .seconds(3600)
    scenario.nodes = 3
    scenario.faults.serverRestartsPerHour = 6
    let report = EpisodeSimulation.run(scenario)
    #expect(report.violations.isEmpty, "seed \(seed): \(report.violations.prefix(5))")
    #expect(report.converged)
    #expect(report.batchesChecked > 0 && report.commands > 0)
  }

  @Test(
    "20 seeds (60 in a full run) on 3 nodes and 8 partitions: each user served by its partition's holder, leases move when nodes die",
    .cpuBound,
    arguments: TestSeeds.first(20, of: 60) as Range<UInt64>
  )
  func partitionedClusterSeeds(seed: UInt64) {
    var scenario = EpisodeSimulation.Scenario(seed: seed)
    scenario.duration = .seconds(3600)
    scenario.nodes = 3
    scenario.partitions = 8
    scenario.faults.serverRestartsPerHour = 6
    let report = EpisodeSimulation.run(scenario)
    #expect(report.violations.isEmpty, "seed \(seed): \(report.violations.prefix(5))")
    #expect(report.converged)
    #expect(report.batchesChecked > 0 && report.commands > 0)
  }

  @Test("partitioned runs move leases: a killed node's partitions go to the others, and come back")
  func partitionsMove() {
    var totals = (kills: 0, taken: 0, moves: 0, batches: 0)
    for seed in 0..<20 as Range<UInt64> {
      var scenario = EpisodeSimulation.Scenario(seed: seed)
      scenario.duration = .seconds(3600)
      scenario.nodes = 3
      scenario.partitions = 8
      scenario.faults.serverRestartsPerHour = 6
      let report = EpisodeSimulation.run(scenario)
      totals.kills += report.nodeKills
      totals.taken += report.partitionsTaken
      totals.moves += report.partitionMoves
      totals.batches += report.batchesChecked
    }
    // 8 taken at the start of each run; each kill of a node holding partitions frees 2 or 3, which the
    // other nodes take (moves), and which move back once the node is back and the others let go.
    #expect(totals.kills > 60)
    #expect(totals.taken > 20 * 8 + totals.kills)
    #expect(totals.moves > totals.kills)
    #expect(totals.batches > 1_000)
  }

  @Test("the cluster runs are busy: nodes are killed while devices poll and write through every node")
  func clusterBusyEnough() {
    var totals = (kills: 0, batches: 0, commands: 0)
    for seed in 0..<20 as Range<UInt64> {
      var scenario = EpisodeSimulation.Scenario(seed: seed)
      scenario.duration = .seconds(3600)
      scenario.nodes = 3
      scenario.faults.serverRestartsPerHour = 6
      let report = EpisodeSimulation.run(scenario)
      totals.kills += report.nodeKills
      totals.batches += report.batchesChecked
      totals.commands += report.commands
    }
    #expect(totals.kills > 60)
    #expect(totals.batches > 1_000)
    #expect(totals.commands > 200)
  }

  @Test("the run is busy: faults happen, devices register again, downloads start and batches are checked")
  func busyEnough() {
    var totals = (batches: 0, downloads: 0, reRegistrations: 0, commands: 0)
    for seed in 0..<20 as Range<UInt64> {
      var scenario = EpisodeSimulation.Scenario(seed: seed)
      scenario.duration = .seconds(2 * 3600)
      let report = EpisodeSimulation.run(scenario)
      totals.batches += report.batchesChecked
      totals.downloads += report.downloadsStarted
      totals.reRegistrations += report.reRegistrations
      totals.commands += report.commands
    }
    #expect(totals.batches > 1_000)
    #expect(totals.downloads > 50)
    #expect(totals.reRegistrations > 0)
    #expect(totals.commands > 200)
  }

  @Test("docs/simulation.md's cluster example is this code, and it runs clean with nodes killed")
  func documentedClusterExample() throws {
    // CLUSTER-BEGIN
    var scenario = EpisodeSimulation.Scenario(seed: 7)
    scenario.nodes = 3
    scenario.faults.serverRestartsPerHour = 6
    let report = EpisodeSimulation.run(scenario)  // report.nodeKills: how many nodes were killed
    // CLUSTER-END
    #expect(report.violations.isEmpty && report.converged)
    let code = try DocumentedCode.code(named: "CLUSTER", in: #filePath, indent: 4)
    #expect(try DocumentedCode.simulationPage(from: #filePath).contains(code))
  }

  @Test("docs/simulation.md's example is this code, and it runs clean")
  func documentedExample() throws {
    // DOC-BEGIN
    let report = EpisodeSimulation.run(EpisodeSimulation.Scenario(seed: 7))
    print(report.violations)  // [] when every invariant held
    // DOC-END
    #expect(report.violations.isEmpty && report.converged)
    let code = try DocumentedCode.code(named: "DOC", in: #filePath, indent: 4)
    #expect(try DocumentedCode.simulationPage(from: #filePath).contains(code))
  }
}
