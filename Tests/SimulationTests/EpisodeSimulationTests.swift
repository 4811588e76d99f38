import EventProtocol
import Foundation
import Simulation
import Testing

/// docs/episode-queue.md §5's randomized simulation, on the Simulation library.
@Suite("The episode queue in the simulated world", .serialized)
struct EpisodeSimulationTests {
  @Test(
    "1,000 seeds: 1-4 devices per listener, broadcaster churn, every fault; every invariant holds",
    arguments: 0..<1_000 as Range<UInt64>
  )
  func seeds(seed: UInt64) {
    var scenario = EpisodeSimulation.Scenario(seed: seed)
    scenario.duration = .seconds(3600)
    let report = EpisodeSimulation.run(scenario)
    #expect(report.violations.isEmpty, "seed \(seed): \(report.violations.prefix(5))")
    #expect(report.converged)
    #expect(report.batchesChecked > 0 && report.commands > 0)
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

  @Test("docs/simulation.md's example is this code, and it runs clean")
  func documentedExample() throws {
    // DOC-BEGIN
    let report = EpisodeSimulation.run(EpisodeSimulation.Scenario(seed: 7))
    print(report.violations)  // [] when every invariant held
    // DOC-END
    #expect(report.violations.isEmpty && report.converged)
    let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
    let begin = try #require(source.range(of: "// DOC-BEGIN\n"))
    let end = try #require(source.range(of: "    // DOC-END"))
    let code = source[begin.upperBound..<end.lowerBound].split(separator: "\n").map { $0.dropFirst(4) }
      .joined(separator: "\n")
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    let page = try String(contentsOf: root.appendingPathComponent("docs/simulation.md"), encoding: .utf8)
    #expect(page.contains(code))
  }
}
