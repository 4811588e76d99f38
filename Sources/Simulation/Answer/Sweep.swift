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
