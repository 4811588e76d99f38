import EventProtocol
import Foundation
import Simulation

/// Runs the simulation the options describe and prints it for a person (or as JSON for tools).
struct SimulationDemo {
  let options: DemoOptions

  /// - Returns: Whether every run converged with every invariant held.
  func run() throws -> Bool {
    if options.seeds > 1 { return runManySeeds() }
    let started = Date()
    let reports = options.strategies.map { strategy -> SimulationReport in
      var scenario = options.scenario
      scenario.strategy = strategy
      return Simulation.run(scenario)
    }
    let elapsed = Date().timeIntervalSince(started)
    if let path = options.reportPath {
      try HTMLReport(reports: reports).write(to: URL(fileURLWithPath: path))
    }
    if options.json {
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
      print(String(decoding: try encoder.encode(reports.count == 1 ? [reports[0]] : reports), as: UTF8.self))
      return reports.allSatisfy(\.converged)
    }
    printHeader()
    if reports.count == 1 {
      printRun(reports[0])
    } else {
      printComparison(reports)
    }
    let deviceHours = reports.map(\.deviceHours).reduce(0, +)
    print("\nSimulated \(Int(deviceHours)) device-hours in \(String(format: "%.2f", elapsed)) s of wall time.")
    if let path = options.reportPath { print("Report written to \(path).") }
    print("Replay: \(options.replayCommand)")
    return reports.allSatisfy(\.converged)
  }

  private func printHeader() {
    let scenario = options.scenario
    print(
      """
      Video messaging on a flaky network — seed \(scenario.seed)
      \(scenario.users) users × \(scenario.devicesPerUser) device(s), \(Int(scenario.duration.inSeconds / 3600)) h of \
      faults (latency \(scenario.faults.latencyMilliseconds.lowerBound)–\(scenario.faults.latencyMilliseconds.upperBound) ms, \
      \(Int(scenario.faults.pushLoss * 100))% pushes lost, \(scenario.faults.offlinePerHour) offline periods and \
      \(scenario.faults.crashesPerHour) app kills per device-hour, \(scenario.faults.serverRestartsPerHour) server restarts per hour), \
      then the faults stop and every device must converge.
      """
    )
  }

  private func printRun(_ report: SimulationReport) {
    print("\nStrategy \(report.scenario.strategy). The moments that matter:")
    for line in highlights(report.timeline) { print("  " + line) }
    if !report.trace.isEmpty {
      print("\nFull trace:")
      for line in report.trace { print("  " + line) }
    }
    print("\nSummary")
    let rows: [(String, String)] = [
      ("videos sent / delivered", "\(report.videosSent) / \(report.videosDelivered)"),
      ("staleness, app open (p50 / p99 / max)", report.foregroundStaleness.description),
      ("staleness, app closed (p50 / p99 / max)", report.backgroundStaleness.description),
      (
        "wrong status shown, s per open hour (longest)",
        "\(String(format: "%.1f", report.wrongStatusSecondsPerOpenHour)) (\(Percentiles.format(report.longestWrongStatusSeconds)))"
      ),
      ("requests per device-hour", String(format: "%.1f", report.requestsPerDeviceHour)),
      ("kB per device-hour", String(format: "%.0f", report.bytesPerDeviceHour / 1000)),
      (
        "pushes sent / lost / redundant / applied with no request",
        "\(report.pushesSent) / \(report.pushesLost) / \(report.pushesRedundant) / \(report.pushesAppliedWithoutRequest)"
      ),
      ("re-registrations", "\(report.reregistrations)"),
      ("time live / settling / connecting / cannot connect", freshness(report)),
    ]
    for (name, value) in rows { print("  " + name.padding(toLength: 58, withPad: " ", startingAt: 0) + value) }
    print("\n" + verdict(report))
  }

  private func printComparison(_ reports: [SimulationReport]) {
    print("\nThe same seed under each strategy:\n")
    let header = [
      "", "staleness open p50/p99", "staleness closed p50/p99", "wrong s/open h", "longest wrong", "req/dev-h",
      "kB/dev-h", "verdict",
    ]
    let widths = [20, 24, 26, 16, 15, 11, 10, 14]
    print(zip(header, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined())
    for report in reports {
      let cells = [
        report.scenario.strategy.rawValue,
        "\(Percentiles.format(report.foregroundStaleness.p50)) / \(Percentiles.format(report.foregroundStaleness.p99))",
        "\(Percentiles.format(report.backgroundStaleness.p50)) / \(Percentiles.format(report.backgroundStaleness.p99))",
        String(format: "%.1f", report.wrongStatusSecondsPerOpenHour),
        Percentiles.format(report.longestWrongStatusSeconds),
        String(format: "%.1f", report.requestsPerDeviceHour),
        String(format: "%.0f", report.bytesPerDeviceHour / 1000),
        report.converged ? "converged" : "NOT converged",
      ]
      print(zip(cells, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined())
    }
    for report in reports where !report.converged { print("\n\(report.scenario.strategy): " + verdict(report)) }
  }

  private func runManySeeds() -> Bool {
    var failures: [String] = []
    let started = Date()
    var deviceHours = 0.0
    for offset in 0..<options.seeds {
      for strategy in options.strategies {
        var scenario = options.scenario
        scenario.seed = options.scenario.seed &+ UInt64(offset)
        scenario.strategy = strategy
        let report = Simulation.run(scenario)
        deviceHours += report.deviceHours
        if !report.converged { failures.append("seed \(scenario.seed) \(strategy): \(verdict(report))") }
      }
      if (offset + 1) % max(options.seeds / 20, 1) == 0 || offset + 1 == options.seeds {
        FileHandle.standardError.write(Data("\r\(offset + 1)/\(options.seeds) seeds, \(failures.count) failed".utf8))
      }
    }
    FileHandle.standardError.write(Data("\n".utf8))
    let elapsed = Date().timeIntervalSince(started)
    print("\(options.seeds) seeds × \(options.strategies.count) strategies: \(failures.count) NOT converged")
    for failure in failures.prefix(20) { print("  " + failure) }
    print(
      String(
        format: "%.0f simulated device-hours in %.1f s: %.0f device-hours per second",
        deviceHours,
        elapsed,
        deviceHours / max(elapsed, 0.001)
      )
    )
    return failures.isEmpty
  }

  private func verdict(_ report: SimulationReport) -> String {
    if report.converged {
      let time = report.settleTime.map { Percentiles.format($0.inSeconds) } ?? "?"
      return
        "converged: \(time) after the faults stopped, every device showed its user's server state, every outbox was empty and every video delivered."
    }
    if !report.violations.isEmpty {
      return "NOT converged: invariants broken: " + report.violations.prefix(3).joined(separator: "; ")
    }
    return
      "NOT converged within \(Percentiles.format(report.scenario.settleLimit.inSeconds)) after the faults stopped: "
      + report.convergenceGaps.prefix(4).joined(separator: "; ")
  }

  private func freshness(_ report: SimulationReport) -> String {
    ["live", "settling", "connecting", "cannot connect"]
      .map { String(format: "%.0f%%", (report.freshnessShare[$0] ?? 0) * 100) }
      .joined(separator: " / ")
  }

  /// At most 30 lines: every kind of moment at least once, then the rest in order.
  private func highlights(_ timeline: [String]) -> [String] {
    guard timeline.count > 30 else { return timeline }
    var chosen: [Int] = []
    var kinds: Set<String> = []
    for (index, line) in timeline.enumerated() {
      let kind = String(line.dropFirst(11).filter { !$0.isNumber }.prefix(24))
      if kinds.insert(kind).inserted { chosen.append(index) }
    }
    for index in timeline.indices where chosen.count < 30 && !chosen.contains(index) { chosen.append(index) }
    let lines = chosen.sorted().map { timeline[$0] }
    return lines + ["… \(timeline.count - lines.count) more (--trace for every step)"]
  }
}
