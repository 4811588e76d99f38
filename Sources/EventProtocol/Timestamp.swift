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

  /// The timestamp in nanoseconds since the epoch (toward zero), for compact storage: a time beyond the 64-bit
  /// range (±292 years), ``distantPast`` and ``distantFuture`` among them, is `Int64.min` or `Int64.max`.
  @inlinable
  public var nanosecondsSinceEpoch: Int64 {
    let nanoseconds = sinceEpoch.attoseconds / 1_000_000_000
    if nanoseconds >= Int128(Int64.max) { return .max }
    if nanoseconds <= Int128(Int64.min) { return .min }
    return Int64(nanoseconds)
  }

  /// The timestamp `nanoseconds` after the epoch; `Int64.min` and `Int64.max` stand for ``distantPast`` and
  /// ``distantFuture`` (``nanosecondsSinceEpoch``'s saturated values).
  @inlinable
  public init(nanosecondsSinceEpoch nanoseconds: Int64) {
    switch nanoseconds {
    case .min: self = .distantPast
    case .max: self = .distantFuture
    default: self.init(sinceEpoch: .nanoseconds(nanoseconds))
    }
  }

  // Both comparisons are `@inlinable`: deadline heaps in other modules compare timestamps on every step, and
  // calls across the module boundary (the synthesized `==` among them) were most of a simulator heap's pop.
  @inlinable
  public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
    lhs.sinceEpoch < rhs.sinceEpoch
  }

  @inlinable
  public static func == (lhs: Timestamp, rhs: Timestamp) -> Bool {
    lhs.sinceEpoch == rhs.sinceEpoch
  }

  /// The time in UTC, ISO 8601 with milliseconds (`2023-11-14T22:13:20.000Z`); outside years 0…9999,
  /// seconds since the epoch (`t=-62167219201.000s`).
  public var description: String {
    let milliseconds = sinceEpoch.attoseconds / 1_000_000_000_000_000
    let fraction = String(Int(abs(milliseconds % 1000)) + 1000).dropFirst()
    let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
    let millisecond = String(Int(milliseconds - seconds * 1000) + 1000).dropFirst()
    let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
    let secondOfDay = Int(seconds - days * 86_400)
    let (year, month, day) = Self.civil(fromDays: days)
    guard (0...9999).contains(year) else { return "t=\(milliseconds / 1000).\(fraction)s" }
    func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
    let yearText = String(year + 10_000).dropFirst()
    return "\(yearText)-\(two(month))-\(two(day))T\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):"
      + "\(two(secondOfDay % 60)).\(millisecond)Z"
  }

  /// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
  private static func civil(fromDays days: Int128) -> (year: Int, month: Int, day: Int) {
    let shifted = days + 719_468
    let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
    let dayOfEra = shifted - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let monthIndex = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
    let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
    let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    guard let yearValue = Int(exactly: year) else { return (-1, 1, 1) }
    return (yearValue, Int(month), Int(day))
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
