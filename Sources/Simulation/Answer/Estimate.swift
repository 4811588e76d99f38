import EventProtocol
import Foundation

/// A figure measured over many seeds, with its 95 % confidence interval.
public struct Estimate: Sendable, Hashable, Codable, CustomStringConvertible {
  /// The figure over all seeds.
  public var value: Double
  /// The interval's lower end.
  public var low: Double
  /// The interval's upper end.
  public var high: Double

  /// Creates an estimate from its parts.
  public init(value: Double, low: Double, high: Double) {
    self.value = value
    self.low = low
    self.high = high
  }

  public var description: String { "\(Self.short(value)) [\(Self.short(low))–\(Self.short(high))]" }

  /// A figure to three significant digits or so: 1234, 12.3, 1.23.
  public static func short(_ value: Double) -> String {
    value >= 100 ? String(Int(value.rounded())) : String(format: value >= 10 ? "%.1f" : "%.2f", value)
  }

  /// The mean of one value per seed, with a normal interval (1.96 standard errors).
  public static func mean(_ values: [Double]) -> Estimate {
    guard !values.isEmpty else { return Estimate(value: 0, low: 0, high: 0) }
    let count = Double(values.count)
    let mean = values.reduce(0, +) / count
    let variance = values.count > 1 ? values.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / (count - 1) : 0
    let margin = 1.96 * (variance / count).squareRoot()
    return Estimate(value: mean, low: mean - margin, high: mean + margin)
  }

  /// A percentile of samples pooled over seeds, with a cluster bootstrap interval: seeds are drawn again
  /// with replacement (the samples of one seed are not independent of each other), `resamples` times.
  /// A seed with no sample adds nothing; with no sample at all the figure is 0.
  public static func percentile(
    _ fraction: Double,
    of samplesBySeed: [[Double]],
    resamples: Int = 200,
    seed: UInt64 = 1
  ) -> Estimate {
    let value = rank(fraction, of: samplesBySeed.flatMap { $0 }.sorted())
    guard samplesBySeed.count > 1 else { return Estimate(value: value, low: value, high: value) }
    var random = SeededRandomNumberGenerator(seed: seed)
    var figures: [Double] = []
    figures.reserveCapacity(resamples)
    for _ in 0..<resamples {
      var pooled: [Double] = []
      for _ in samplesBySeed.indices {
        pooled += samplesBySeed[Int.random(in: samplesBySeed.indices, using: &random)]
      }
      figures.append(rank(fraction, of: pooled.sorted()))
    }
    figures.sort()
    return Estimate(value: value, low: rank(0.025, of: figures), high: rank(0.975, of: figures))
  }

  /// The value at `fraction` of sorted samples (nearest rank); 0 for none.
  static func rank(_ fraction: Double, of sorted: [Double]) -> Double {
    guard !sorted.isEmpty else { return 0 }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * fraction).rounded()))]
  }
}
