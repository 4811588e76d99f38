import Foundation

/// A point in time that survives a restart: a duration since the Unix epoch.
///
/// Pure state machines take `now` as a `Timestamp` instead of reading a clock, and persisted metadata
/// (a queue's last contact, a client's last successful update) stores it, so it must mean the same thing
/// after the process is gone. Shells turn their injected `Clock` into timestamps with a ``Timeline``.
///
/// ```swift
/// let start = Timestamp(secondsSinceEpoch: 1_700_000_000)
/// let later = start.advanced(by: .seconds(45))
/// assert(start.duration(to: later) == .seconds(45))
/// ```
public struct Timestamp: InstantProtocol, Codable, Hashable, Sendable, CustomStringConvertible {
  /// The time elapsed since 1970-01-01T00:00:00Z.
  public var sinceEpoch: Duration

  /// Creates a timestamp from a duration since the Unix epoch.
  public init(sinceEpoch: Duration) {
    self.sinceEpoch = sinceEpoch
  }

  /// Creates a timestamp a whole number of seconds after the Unix epoch.
  public init(secondsSinceEpoch: Int64) {
    self.sinceEpoch = .seconds(secondsSinceEpoch)
  }

  /// The current wall-clock time. Only shells call this, once, to anchor a ``Timeline``.
  public static func wallClockNow() -> Timestamp {
    let interval = Foundation.Date().timeIntervalSince1970
    let nanoseconds = Int64((interval * 1_000_000_000).rounded())
    return Timestamp(sinceEpoch: .nanoseconds(nanoseconds))
  }

  public func advanced(by duration: Duration) -> Timestamp {
    Timestamp(sinceEpoch: sinceEpoch + duration)
  }

  public func duration(to other: Timestamp) -> Duration {
    other.sinceEpoch - sinceEpoch
  }

  public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
    lhs.sinceEpoch < rhs.sinceEpoch
  }

  public var description: String {
    let milliseconds = sinceEpoch / .milliseconds(1)
    return "t=\(Int(milliseconds) / 1000).\(String(Int(milliseconds) % 1000 + 1000).dropFirst())s"
  }
}

extension Duration {
  /// This duration in (fractional) seconds, for wire fields such as `retry-after`.
  public var inSeconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }

  /// A duration from fractional seconds; negative and non-finite values become zero.
  public static func fractionalSeconds(_ seconds: Double) -> Duration {
    guard seconds.isFinite, seconds > 0 else { return .zero }
    return .nanoseconds(Int64(min(seconds, 1e9) * 1e9))
  }
}
