import EventProtocol
import Foundation
import Simulation
import Testing

@Suite("Simulation: figures over many seeds")
struct EstimateTests {
  @Test("a mean's interval is 1.96 standard errors either side")
  func meanInterval() {
    let estimate = Estimate.mean([1, 2, 3, 4, 5])
    #expect(estimate.value == 3)
    // Sample variance 2.5; standard error (2.5 / 5)^0.5.
    #expect(abs(estimate.high - 3 - 1.96 * (0.5).squareRoot()) < 1e-9)
    #expect(abs(estimate.low - (3 - 1.96 * (0.5).squareRoot())) < 1e-9)
  }

  @Test("a pooled percentile's bootstrap interval holds the figure, narrows with more seeds, replays exactly")
  func percentileInterval() {
    var random = SeededRandomNumberGenerator(seed: 9)
    func seed() -> [Double] { (0..<20).map { _ in Double.random(in: 0..<10, using: &random) } }
    let few = (0..<10).map { _ in seed() }
    let many = few + (0..<190).map { _ in seed() }
    let small = Estimate.percentile(0.9, of: few)
    let large = Estimate.percentile(0.9, of: many)
    #expect(small.low <= small.value && small.value <= small.high)
    #expect(large.low <= large.value && large.value <= large.high)
    #expect(large.high - large.low < small.high - small.low)
    #expect(Estimate.percentile(0.9, of: few) == small)
    #expect(Estimate.percentile(0.5, of: [[1, 2, 3]]) == Estimate(value: 2, low: 2, high: 2))
    #expect(Estimate.percentile(0.99, of: [[], []]).value == 0)
  }
}

@Suite("Simulation: the sweep and its answer", .serialized)
struct SweepTests {
  private static func base() -> Scenario {
    var scenario = Scenario(seed: 40)
    scenario.duration = .seconds(3600)
    return scenario
  }

  private static let points = [
    SweepPoint(strategy: .pollOnly, foregroundPollSeconds: 30, pushLoss: 0),
    SweepPoint(strategy: .pushPlusPoll, pushLoss: 0.2),
    SweepPoint(strategy: .pushPlusPoll, pushLoss: 0.5),
  ]

  @Test("runs on every core give the reports of runs one by one, in order")
  func parallelEqualsSequential() {
    let scenarios = (0..<6).map { offset in
      var scenario = Self.points[offset % 3].scenario(from: Self.base())
      scenario.seed += UInt64(offset)
      return scenario
    }
    #expect(Sweep.runAll(scenarios) == scenarios.map(Simulation.run))
  }

  @Test("the answer is the cheapest configuration meeting the target at every push-loss rate, or none")
  func chooses() {
    var loose = ExperienceTarget()
    loose.whileOpenP99 = 1e6
    loose.afterOpeningP99 = 1e6
    loose.closedMedian = 1e6
    let answer = Sweep.answer(base: Self.base(), points: Self.points, seeds: 4, target: loose)
    // The three points and the baseline, every seed converged.
    #expect(answer.results.count == 4 && answer.results.allSatisfy { $0.failures == 0 })
    #expect(answer.baseline?.point == SweepPoint.baseline)
    let worstCost = Dictionary(grouping: answer.results, by: \.point.configuration).mapValues {
      $0.map(\.serverCost.value).max()!
    }
    #expect(answer.chosen == worstCost.min { $0.value < $1.value }?.key)
    #expect(answer.chosenResults.allSatisfy { $0.point.configuration == answer.chosen })
    #expect(answer.runnerUp != nil && answer.runnerUpCostsMore!.value >= 0)

    var impossible = loose
    impossible.whileOpenP99 = 0
    let none = Sweep.answer(base: Self.base(), points: Self.points, seeds: 4, target: impossible)
    #expect(none.chosen == nil && none.chosenResults.isEmpty)

    // A configuration must meet the target at each push-loss rate: push+poll with its 50% point made to
    // fail is not chosen, even if its other point qualifies.
    var strict = loose
    let pushPlusPoll = answer.results.filter { $0.point.strategy == .pushPlusPoll }
    strict.closedMedian =
      (pushPlusPoll.map(\.closedMedian.high).min()! + pushPlusPoll.map(\.closedMedian.high).max()!) / 2
    let split = SweepAnswer(target: strict, results: answer.results, baseline: answer.baseline)
    if pushPlusPoll.map(\.closedMedian.high).min()! < pushPlusPoll.map(\.closedMedian.high).max()! {
      #expect(split.chosen != "push+poll")
    }
  }
}

@Suite("Simulation: docs/simulation.md's sweep example")
struct SweepDocumentationTests {
  @Test("the example is this code, and it runs: every seed converges and the point is measured")
  func documentedSweep() throws {
    // SWEEP-BEGIN
    var base = Scenario(seed: 1)
    base.duration = .seconds(2 * 3600)
    base.platform = .android
    let points = [SweepPoint(strategy: .pushPlusPoll, requestDeadlineSeconds: 4, pushLoss: 0.2)]
    let answer = Sweep.answer(base: base, points: points, seeds: 10)
    print(answer.chosen ?? "no configuration meets the target")
    // SWEEP-END
    #expect(answer.results.count == 2 && answer.results.allSatisfy { $0.failures == 0 && $0.seeds == 10 })
    #expect(answer.results[0].serverCost.value > 0 && answer.results[0].parkedSeconds.value > 0)
    let code = try DocumentedCode.code(named: "SWEEP", in: #filePath, indent: 4)
    #expect(try DocumentedCode.simulationPage(from: #filePath).contains(code))
  }
}
