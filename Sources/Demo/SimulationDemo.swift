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
      \(scenario.faults.crashesPerHour + scenario.faults.killsBetweenStepsPerHour) app kills per device-hour, \
      \(scenario.faults.serverRestartsPerHour) server restarts per hour) on \(scenario.platform) (the OS suspends a \
      closed app, rations its background time and silent pushes), then the faults stop and every device must \
      converge.
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
      ("app opens / videos recorded / app kills", "\(report.appOpens) / \(report.recordings) / \(report.appKills)"),
      ("videos sent / delivered", "\(report.videosSent) / \(report.videosDelivered)"),
      ("wrong status while the user looks (p50 / p99 / max)", report.wrongStatusWhileOpen.description),
      ("wrong status on opening the app (p50 / p99 / max)", report.wrongStatusAfterOpening.description),
      (
        "wrong status shown, s per open hour (longest)",
        "\(String(format: "%.1f", report.wrongStatusSecondsPerOpenHour)) (\(Percentiles.format(report.longestWrongStatusSeconds)))"
      ),
      ("change made while closed reaches the device (p50 / p99)", closed(report)),
      (
        "sync requests / sync kB per device-hour",
        String(format: "%.1f / %.1f", report.requestsPerDeviceHour, report.bytesPerDeviceHour / 1000)
      ),
      ("video kB per device-hour (content, apart)", String(format: "%.0f", report.contentBytesPerDeviceHour / 1000)),
      (
        "server: requests + pushes / parked-poll s per device-hour",
        String(
          format: "%.1f / %.0f",
          report.serverRequestsPerDeviceHour + report.pushesSentPerDeviceHour,
          report.parkedPollSecondsPerDeviceHour
        )
      ),
      (
        "pushes sent / lost / redundant / applied with no request",
        "\(report.pushesSent) / \(report.pushesLost) / \(report.pushesRedundant) / \(report.pushesAppliedWithoutRequest)"
      ),
      (
        "OS (\(report.scenario.platform)): wakes / pushes throttled / dropped (force-quit)",
        "\(report.wakes) / \(report.pushesThrottled) / \(report.pushesDiscarded)"
      ),
      ("re-registrations", "\(report.reregistrations)"),
      ("open time live / settling / connecting / cannot connect", freshness(report)),
    ]
    for (name, value) in rows { print("  " + name.padding(toLength: 66, withPad: " ", startingAt: 0) + value) }
    print("\n" + verdict(report))
  }

  private func printComparison(_ reports: [SimulationReport]) {
    print("\nThe same seed under each strategy (the same users, network and OS for each):\n")
    let header = [
      "", "wrong while open p99", "wrong on opening p99", "closed p50/p99", "sync req/dev-h", "sync kB/dev-h",
      "server req+push/dev-h", "verdict",
    ]
    let widths = [20, 22, 22, 20, 16, 15, 23, 14]
    print(zip(header, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined())
    for report in reports {
      let cells = [
        report.scenario.strategy.rawValue,
        Percentiles.format(report.wrongStatusWhileOpen.p99),
        Percentiles.format(report.wrongStatusAfterOpening.p99),
        closed(report),
        String(format: "%.1f", report.requestsPerDeviceHour),
        String(format: "%.1f", report.bytesPerDeviceHour / 1000),
        String(format: "%.1f", report.serverRequestsPerDeviceHour + report.pushesSentPerDeviceHour),
        report.converged ? "converged" : "NOT converged",
      ]
      print(zip(cells, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined())
    }
    print("\nOne seed; `swift run Demo --answer` gives figures over 200 seeds with 95% intervals.")
    for report in reports where !report.converged { print("\n\(report.scenario.strategy): " + verdict(report)) }
  }

  private func closed(_ report: SimulationReport) -> String {
    "\(Percentiles.format(report.backgroundStaleness.p50)) / \(Percentiles.format(report.backgroundStaleness.p99))"
  }

  private func runManySeeds() -> Bool {
    let started = Date()
    var scenarios: [Scenario] = []
    for offset in 0..<options.seeds {
      for strategy in options.strategies {
        var scenario = options.scenario
        scenario.seed = options.scenario.seed &+ UInt64(offset)
        scenario.strategy = strategy
        scenarios.append(scenario)
      }
    }
    // Every core runs seeds; the reports come back in order, so the output does not depend on timing.
    let reports = Sweep.runAll(
      scenarios,
      progress: { done, total in
        guard done % max(total / 20, 1) == 0 || done == total else { return }
        FileHandle.standardError.write(Data("\r\(done)/\(total) runs".utf8))
      }
    )
    let failures = reports.filter { !$0.converged }.map {
      "seed \($0.scenario.seed) \($0.scenario.strategy): \(verdict($0))"
    }
    let deviceHours = reports.map(\.deviceHours).reduce(0, +)
    FileHandle.standardError.write(Data("\n".utf8))
    let elapsed = Date().timeIntervalSince(started)
    print("\(options.seeds) seeds × \(options.strategies.count) strategies: \(failures.count) NOT converged")
    for failure in failures.prefix(20) { print("  " + failure) }
    print(
      String(
        format: "%.0f simulated device-hours in %.1f s on %d cores: %.0f device-hours per second",
        deviceHours,
        elapsed,
        ProcessInfo.processInfo.activeProcessorCount,
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
