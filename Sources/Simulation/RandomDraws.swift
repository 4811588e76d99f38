import EventProtocol
import Foundation

/// The draws both simulated worlds make.
extension SeededRandomNumberGenerator {
  /// True with probability `probability`.
  mutating func chance(_ probability: Double) -> Bool {
    probability > 0 && Double.random(in: 0..<1, using: &self) < probability
  }

  /// A waiting time with the given rate per hour (exponentially distributed); `nil` for a rate of zero.
  mutating func waitingTime(perHour rate: Double) -> Duration? {
    guard rate > 0 else { return nil }
    let uniform = Double.random(in: Double.ulpOfOne..<1, using: &self)
    return .milliseconds(Int64(-log(uniform) / rate * 3_600_000))
  }

  /// A network latency drawn from `milliseconds`.
  mutating func latency(milliseconds: ClosedRange<Int>) -> Duration {
    .milliseconds(Int64(Int.random(in: milliseconds, using: &self)))
  }
}
