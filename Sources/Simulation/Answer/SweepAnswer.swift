import EventProtocol

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
    failures == 0 && bounds(target).allSatisfy { $0.high <= $0.limit }
  }

  /// Each experience figure's name and the upper end of its interval, beside the target's bound for it: what
  /// ``meets(_:)`` checks, and what a report says when a point misses.
  public func bounds(_ target: ExperienceTarget) -> [(name: String, high: Double, limit: Double)] {
    [
      ("while open p99", whileOpenP99.high, target.whileOpenP99),
      ("after opening p99", afterOpeningP99.high, target.afterOpeningP99),
      ("closed median", closedMedian.high, target.closedMedian),
    ]
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
