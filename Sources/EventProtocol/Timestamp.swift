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
    Timestamp(Foundation.Date())
  }

  /// The earliest timestamp: every computation that would go below it stops there.
  public static let distantPast = Timestamp(sinceEpoch: Duration(attoseconds: Int128.min))
  /// The latest timestamp: every computation that would go beyond it stops there.
  public static let distantFuture = Timestamp(sinceEpoch: Duration(attoseconds: Int128.max))

  /// The timestamp `duration` later, saturating at ``distantPast`` and ``distantFuture`` instead of trapping,
  /// so a persisted or server-chosen extreme value can never crash the engine.
  public func advanced(by duration: Duration) -> Timestamp {
    Timestamp(sinceEpoch: sinceEpoch.saturatingAdding(duration))
  }

  /// The duration from this timestamp to `other`, saturating instead of trapping.
  public func duration(to other: Timestamp) -> Duration {
    other.sinceEpoch.saturatingAdding(sinceEpoch.saturatingNegated)
  }

  /// The timestamp of a `Date`, for "data as of" displays and for anchoring a ``Timeline``.
  public init(_ date: Date) {
    let nanoseconds = (date.timeIntervalSince1970 * 1_000_000_000).rounded()
    let clamped = min(max(nanoseconds, -9.2e18), 9.2e18)
    self.init(sinceEpoch: .nanoseconds(Int64(clamped)))
  }

  /// This timestamp as a `Date` (to the precision a `Date` holds), for formatting "data as of" labels.
  public var date: Date {
    Date(timeIntervalSince1970: sinceEpoch.inSeconds)
  }

  public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
    lhs.sinceEpoch < rhs.sinceEpoch
  }

  public var description: String {
    let milliseconds = sinceEpoch.attoseconds / 1_000_000_000_000_000
    let fraction = String(Int(abs(milliseconds % 1000)) + 1000).dropFirst()
    return "t=\(milliseconds / 1000).\(fraction)s"
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

  /// The sum, saturating at the largest and smallest durations instead of trapping.
  public func saturatingAdding(_ other: Duration) -> Duration {
    let (sum, overflow) = attoseconds.addingReportingOverflow(other.attoseconds)
    guard overflow else { return Duration(attoseconds: sum) }
    return Duration(attoseconds: other.attoseconds > 0 ? Int128.max : Int128.min)
  }

  /// The negated duration, saturating (the smallest duration negates to the largest).
  public var saturatingNegated: Duration {
    attoseconds == Int128.min ? Duration(attoseconds: Int128.max) : Duration(attoseconds: -attoseconds)
  }

  /// This duration limited to `range`: how the engine tames durations it did not choose (a server's
  /// `retry-after`, a recommended long-poll timeout, a persisted value).
  public func clamped(to range: ClosedRange<Duration>) -> Duration {
    min(max(self, range.lowerBound), range.upperBound)
  }
}
