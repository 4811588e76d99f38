import EventProtocol
import Foundation
import Simulation

/// `swift run Demo --answer`: sweeps configurations over many seeds and states the cheapest that gives the
/// target experience, for a person (or as JSON), and as an HTML page with `--report`.
struct AnswerDemo {
  let options: DemoOptions

  /// - Returns: Whether every run converged with every invariant held.
  func run() throws -> Bool {
    let points = SweepPoint.standard(pushLosses: options.pushLosses)
    let base = options.scenario
    let total = (points.count + 1) * options.seedsPerPoint
    let started = Date()
    let showsProgress = !options.json
    let answer = Sweep.answer(
      base: base,
      points: points,
      seeds: options.seedsPerPoint,
      target: options.target,
      progress: { done, total in
        guard showsProgress, done % max(total / 50, 1) == 0 || done == total else { return }
        FileHandle.standardError.write(Data("\r\(done)/\(total) runs".utf8))
      }
    )
    if showsProgress { FileHandle.standardError.write(Data("\n".utf8)) }
    let elapsed = Date().timeIntervalSince(started)
    let results = answer.results
    let failures = results.map(\.failures).reduce(0, +)
    if let path = options.reportPath {
      try AnswerReport(answer: answer, scenario: base, seedsPerPoint: options.seedsPerPoint).write(
        to: URL(fileURLWithPath: path)
      )
    }
    if options.json {
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
      print(String(decoding: try encoder.encode(answer), as: UTF8.self))
      return failures == 0
    }
    let hours = base.duration.inSeconds / 3600
    print(
      """
      Seed 000's question: the cheapest way to keep a sender's status right, app open or not, even when pushes \
      are lost.
      Platform \(base.platform); \(base.users) users × \(base.devicesPerUser) device(s), \(Self.number(hours)) h per \
      seed, seeds \(base.seed)–\(base.seed &+ UInt64(options.seedsPerPoint - 1)) under every configuration (the \
      same users, network and OS for each: common random numbers).
      Target (each bound on the upper end of a 95% interval): \(answer.target).

      """
    )
    let header = [
      "configuration", "pushes lost", "server req+push/dev-h", "while open p99", "after opening p99",
      "closed median", "sync kB/dev-h", "parked s/dev-h", "meets",
    ]
    let widths = [46, 12, 24, 22, 22, 24, 14, 15, 6]
    print(Self.row(header, widths))
    for result in results {
      let isBaseline = result.point == SweepPoint.baseline
      let cells = [
        result.point.configuration + (isBaseline ? " (baseline)" : "") + (answer.isChosen(result) ? " ◀" : ""),
        result.point.strategy.usesPushes ? "\(Int((result.point.pushLoss * 100).rounded()))%" : "—",
        result.serverCost.description,
        Self.seconds(result.whileOpenP99),
        Self.seconds(result.afterOpeningP99),
        Self.seconds(result.closedMedian),
        Estimate.short(result.syncKilobytes.value),
        Estimate.short(result.parkedSeconds.value),
        result.meets(answer.target) ? "yes" : "no",
      ]
      print(Self.row(cells, widths))
    }
    print("")
    print(Self.verdict(answer))
    if failures > 0 { print("\n\(failures) runs did NOT converge or broke an invariant: the figures are suspect.") }
    let deviceHours = Double(total) * hours * Double(base.users * base.devicesPerUser)
    print(
      String(
        format: "\nSimulated %.0f device-hours (%d runs) in %.1f s on %d cores: %.0f device-hours per second.",
        deviceHours,
        total,
        elapsed,
        ProcessInfo.processInfo.activeProcessorCount,
        deviceHours / max(elapsed, 0.001)
      )
    )
    if let path = options.reportPath { print("Report written to \(path).") }
    return failures == 0
  }

  /// The answer in words.
  static func verdict(_ answer: SweepAnswer) -> String {
    guard let chosen = answer.chosen,
      let worst = answer.chosenResults.max(by: { $0.serverCost.value < $1.serverCost.value })
    else {
      // The configuration whose worst point misses least, and that point's shortfall.
      var configurations: [String] = []
      for result in answer.results where !configurations.contains(result.point.configuration) {
        configurations.append(result.point.configuration)
      }
      let worstPoints = configurations.compactMap { configuration in
        answer.results.filter { $0.point.configuration == configuration }.max {
          misses($0, answer.target) < misses($1, answer.target)
        }
      }
      let closest = worstPoints.min { misses($0, answer.target) < misses($1, answer.target) }
      return "Answer: no configuration meets the target at every push-loss rate."
        + (closest.map { " Closest: \($0.point) (\(Self.shortfall($0, answer.target)))." } ?? "")
    }
    var text =
      "Answer: \(chosen) is the cheapest configuration that meets the target at every push-loss rate swept: "
      + "\(worst.serverCost) server requests and pushes per device-hour at its worst (\(worst.point))"
    if let baseline = answer.baseline, worst.serverCost.value > 0 {
      text += String(
        format: ", against %@ for polling every 5 s (%.1f× more)",
        baseline.serverCost.description,
        baseline.serverCost.value / worst.serverCost.value
      )
    }
    text += "."
    if let runnerUp = answer.runnerUp, let more = answer.runnerUpCostsMore {
      text +=
        " Next: \(runnerUp), which costs \(more) more per device-hour, seed for seed"
        + (more.low <= 0 ? " (not a significant difference: choose on other grounds)." : ".")
    }
    return text
  }

  /// How far a result is from the target, summed over its bounds (0 when it meets them).
  static func misses(_ result: SweepResult, _ target: ExperienceTarget) -> Double {
    result.bounds(target).map { max(0, $0.high / $0.limit - 1) }.reduce(0, +) + Double(result.failures)
  }

  static func shortfall(_ result: SweepResult, _ target: ExperienceTarget) -> String {
    var misses = result.bounds(target).filter { $0.high > $0.limit }.map {
      "\($0.name) up to \(Percentiles.format($0.high))"
    }
    if result.failures > 0 { misses.append("\(result.failures) runs failed") }
    return misses.joined(separator: ", ")
  }

  static func seconds(_ estimate: Estimate) -> String {
    "\(Percentiles.format(estimate.value)) [\(Percentiles.format(estimate.low))–\(Percentiles.format(estimate.high))]"
  }

  static func number(_ value: Double) -> String {
    value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
  }

  static func row(_ cells: [String], _ widths: [Int]) -> String {
    zip(cells, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined()
  }
}
