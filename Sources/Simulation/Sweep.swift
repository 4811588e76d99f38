import Dispatch
import EventProtocol
import Synchronization

/// One configuration a sweep tries: a strategy, its poll interval while open (poll-only), and the share of
/// pushes the push service loses (the world's condition, not a choice).
public struct SweepPoint: Sendable, Hashable, Codable, CustomStringConvertible {
  /// How devices learn about changes.
  public var strategy: DeliveryStrategy
  /// Poll-only's interval while the app is open, in seconds (`nil` for the other strategies).
  public var foregroundPollSeconds: Int?
  /// The deadline of requests other than the long-poll, in seconds (`nil`: the engine's defaults).
  public var requestDeadlineSeconds: Int?
  /// The share of pushes lost on the way.
  public var pushLoss: Double

  /// Creates a point.
  public init(
    strategy: DeliveryStrategy,
    foregroundPollSeconds: Int? = nil,
    requestDeadlineSeconds: Int? = nil,
    pushLoss: Double
  ) {
    self.strategy = strategy
    self.foregroundPollSeconds = foregroundPollSeconds
    self.requestDeadlineSeconds = requestDeadlineSeconds
    self.pushLoss = pushLoss
  }

  /// The configuration without the world's condition: what an app developer chooses.
  public var configuration: String {
    var text = strategy.rawValue
    if let seconds = foregroundPollSeconds { text += " every \(seconds) s" }
    if let seconds = requestDeadlineSeconds { text += ", \(seconds) s deadlines" }
    return text
  }

  public var description: String {
    strategy.usesPushes ? "\(configuration), \(Int((pushLoss * 100).rounded()))% pushes lost" : configuration
  }

  /// `base` with this point's choices.
  public func scenario(from base: Scenario) -> Scenario {
    var scenario = base
    scenario.strategy = strategy
    if let foregroundPollSeconds { scenario.foregroundPollSeconds = foregroundPollSeconds }
    scenario.requestDeadlineSeconds = requestDeadlineSeconds
    scenario.faults.pushLoss = pushLoss
    return scenario
  }

  /// Polling every 5 seconds while open: the simple, expensive reference.
  public static let baseline = SweepPoint(strategy: .pollOnly, foregroundPollSeconds: 5, pushLoss: 0)

  /// The default sweep: every strategy, poll-only at 5, 15, 30 and 60 s, the push strategies at each push
  /// loss rate; each with the engine's request deadlines and with `shortDeadline` seconds.
  public static func standard(pushLosses: [Double] = [0.05, 0.2, 0.5], shortDeadline: Int = 4) -> [SweepPoint] {
    var points: [SweepPoint] = []
    for deadline in [nil, shortDeadline] {
      points += [5, 15, 30, 60].map {
        SweepPoint(strategy: .pollOnly, foregroundPollSeconds: $0, requestDeadlineSeconds: deadline, pushLoss: 0)
      }
      for strategy in [DeliveryStrategy.pushOnly, .pushPlusPoll, .pushPlusPollPayload] {
        points += pushLosses.map { SweepPoint(strategy: strategy, requestDeadlineSeconds: deadline, pushLoss: $0) }
      }
    }
    return points
  }
}

/// The experience a configuration must give: the seed's "sender sees the correct status", made
/// measurable. Each bound applies to the upper end of the figure's 95 % interval.
public struct ExperienceTarget: Sendable, Hashable, Codable, CustomStringConvertible {
  /// While the user looks, a status the server moved past is corrected within this, at the 99th percentile
  /// (seconds).
  public var whileOpenP99: Double = 2
  /// A status wrong when the app opens is corrected within this, at the 99th percentile (seconds).
  public var afterOpeningP99: Double = 5
  /// A change made while the app is closed reaches the device within this, at the median (seconds): the
  /// OS decides when a closed app runs, so a tail bound is not the app's to give.
  public var closedMedian: Double = 15 * 60

  /// The default target.
  public init() {}

  public var description: String {
    "while open, a wrong status corrected within \(Percentiles.format(whileOpenP99)) (p99); "
      + "after opening, within \(Percentiles.format(afterOpeningP99)) (p99); "
      + "closed, a change reaches the device within \(Percentiles.format(closedMedian)) (median)"
  }
}

/// What a sweep measured at one point over its seeds.
public struct SweepResult: Sendable, Hashable, Codable {
  /// The configuration and condition.
  public var point: SweepPoint
  /// Seeds run.
  public var seeds: Int
  /// Seeds whose world did not converge or broke an invariant (they should be 0).
  public var failures: Int
  /// The cost the answer minimises: requests the server answers plus pushes it sends, per device-hour.
  public var serverCost: Estimate
  /// Sync requests per device-hour.
  public var syncRequests: Estimate
  /// Sync kilobytes per device-hour (video content apart).
  public var syncKilobytes: Estimate
  /// Seconds of long-poll the server holds, per device-hour.
  public var parkedSeconds: Estimate
  /// Pushes sent per device-hour.
  public var pushes: Estimate
  /// Wrong status that began while the user looked: seconds on screen, 99th percentile.
  public var whileOpenP99: Estimate
  /// Wrong status shown on opening: seconds on screen, 99th percentile.
  public var afterOpeningP99: Estimate
  /// A change made while closed: seconds until the device held it, median.
  public var closedMedian: Estimate
  /// Seconds of wrong status per open hour.
  public var wrongSecondsPerOpenHour: Estimate
  /// Video kilobytes per device-hour (the same under every strategy: a check of common random numbers).
  public var contentKilobytes: Estimate
  /// ``serverCost`` seed by seed, in seed order: for paired comparisons (every point meets the same seeds).
  public var serverCostBySeed: [Double]

  /// Whether the upper end of every experience figure meets `target` (and every seed converged).
  public func meets(_ target: ExperienceTarget) -> Bool {
    failures == 0 && whileOpenP99.high <= target.whileOpenP99 && afterOpeningP99.high <= target.afterOpeningP99
      && closedMedian.high <= target.closedMedian
  }

  /// Aggregates the reports of one point's seeds.
  public init(point: SweepPoint, reports: [SimulationReport]) {
    self.point = point
    seeds = reports.count
    failures = reports.filter { !$0.converged }.count
    serverCostBySeed = reports.map { $0.serverRequestsPerDeviceHour + $0.pushesSentPerDeviceHour }
    serverCost = .mean(serverCostBySeed)
    syncRequests = .mean(reports.map(\.requestsPerDeviceHour))
    syncKilobytes = .mean(reports.map { $0.bytesPerDeviceHour / 1000 })
    parkedSeconds = .mean(reports.map(\.parkedPollSecondsPerDeviceHour))
    pushes = .mean(reports.map(\.pushesSentPerDeviceHour))
    whileOpenP99 = .percentile(0.99, of: reports.map(\.samples.wrongWhileOpen))
    afterOpeningP99 = .percentile(0.99, of: reports.map(\.samples.wrongAfterOpening))
    closedMedian = .percentile(0.5, of: reports.map(\.samples.closedStaleness))
    wrongSecondsPerOpenHour = .mean(reports.map(\.wrongStatusSecondsPerOpenHour))
    contentKilobytes = .mean(reports.map { $0.contentBytesPerDeviceHour / 1000 })
  }
}

/// The answer to seed 000's question: the cheapest configuration that gives the target experience under
/// every push-loss rate swept, beside the 5-second-polling baseline.
public struct SweepAnswer: Sendable, Hashable, Codable {
  /// The experience asked for.
  public var target: ExperienceTarget
  /// Every point measured, in sweep order.
  public var results: [SweepResult]
  /// The baseline's result.
  public var baseline: SweepResult?
  /// The configuration chosen (as ``SweepPoint/configuration``), or `nil` when none meets the target.
  public var chosen: String?
  /// Its results, one per push-loss rate.
  public var chosenResults: [SweepResult]
  /// The next cheapest configuration that meets the target, if any.
  public var runnerUp: String?
  /// What the runner-up costs more than the chosen one, per device-hour, seed by seed at their worst
  /// push-loss rates (a paired interval: both met the same seeds, so it is much tighter than either
  /// figure's own).
  public var runnerUpCostsMore: Estimate?

  /// Chooses among `results`: configurations whose every push-loss point meets `target`, the one whose
  /// worst point costs the server least.
  public init(target: ExperienceTarget, results: [SweepResult], baseline: SweepResult?) {
    self.target = target
    self.results = results
    self.baseline = baseline
    var byConfiguration: [String: [SweepResult]] = [:]
    var order: [String] = []
    for result in results {
      if byConfiguration[result.point.configuration] == nil { order.append(result.point.configuration) }
      byConfiguration[result.point.configuration, default: []].append(result)
    }
    func worst(_ configuration: String) -> SweepResult {
      byConfiguration[configuration]!.max { $0.serverCost.value < $1.serverCost.value }!
    }
    let qualifying = order.filter { byConfiguration[$0]!.allSatisfy { $0.meets(target) } }
      .sorted { worst($0).serverCost.value < worst($1).serverCost.value }
    chosen = qualifying.first
    chosenResults = qualifying.first.map { byConfiguration[$0]! } ?? []
    runnerUp = qualifying.dropFirst().first
    if let chosen, let runnerUp {
      let differences = zip(worst(runnerUp).serverCostBySeed, worst(chosen).serverCostBySeed).map { $0 - $1 }
      runnerUpCostsMore = .mean(differences)
    }
  }

  /// Whether `result` belongs to the chosen configuration.
  public func isChosen(_ result: SweepResult) -> Bool { result.point.configuration == chosen }
}

/// Runs many seeds of many configurations, on every core, and answers seed 000's question.
///
/// ```swift
/// var base = Scenario(seed: 1)
/// base.duration = .seconds(2 * 3600)
/// let answer = Sweep.answer(base: base, points: SweepPoint.standard(), seeds: 200)
/// print(answer.chosen ?? "no configuration meets the target")
/// ```
public enum Sweep {
  /// Runs `seeds` seeds (from `base.seed` on) of each point, plus the baseline, in parallel on every core;
  /// `progress` hears of each finished run (done, total). The result does not depend on the order runs
  /// finish in. `run` runs one scenario: the video app by default, or your own
  /// (`{ Simulation.run($0, app: MyApp()) }`).
  public static func answer(
    base: Scenario,
    points: [SweepPoint],
    seeds: Int,
    target: ExperienceTarget = ExperienceTarget(),
    run: @Sendable (Scenario) -> SimulationReport = { Simulation.run($0) },
    progress: @Sendable (Int, Int) -> Void = { _, _ in }
  ) -> SweepAnswer {
    let all = points.contains(SweepPoint.baseline) ? points : points + [SweepPoint.baseline]
    let scenarios = all.flatMap { point in
      (0..<seeds).map { offset in
        var scenario = point.scenario(from: base)
        scenario.seed = base.seed &+ UInt64(offset)
        return scenario
      }
    }
    let reports = runAll(scenarios, run: run, progress: progress)
    let results = all.indices.map { index in
      SweepResult(point: all[index], reports: Array(reports[index * seeds..<(index + 1) * seeds]))
    }
    return SweepAnswer(target: target, results: results, baseline: results.first { $0.point == SweepPoint.baseline })
  }

  /// Runs every scenario with `run`, on as many threads as the machine has cores, and returns their
  /// reports in order.
  public static func runAll(
    _ scenarios: [Scenario],
    run: @Sendable (Scenario) -> SimulationReport = { Simulation.run($0) },
    progress: @Sendable (Int, Int) -> Void = { _, _ in }
  ) -> [SimulationReport] {
    let slots = Mutex<(reports: [SimulationReport?], done: Int)>(
      (Array(repeating: nil, count: scenarios.count), 0)
    )
    DispatchQueue.concurrentPerform(iterations: scenarios.count) { index in
      let report = run(scenarios[index])
      let done = slots.withLock { slots in
        slots.reports[index] = report
        slots.done += 1
        return slots.done
      }
      progress(done, scenarios.count)
    }
    return slots.withLock { $0.reports.map { $0! } }
  }
}
