import EventProtocol

/// Exponential backoff with full jitter: the n-th consecutive failure waits a random time in
/// (0, min(cap, base × 2ⁿ⁻¹)].
///
/// The wait is never zero, the bound never overflows however many failures there were, and callers reset
/// the attempt count after a success.
///
/// ```swift
/// var random = SeededRandomNumberGenerator(seed: 1)
/// let wait = BackoffPolicy.standard.delay(attempt: 3, using: &random)   // in (0, 400 ms]
/// ```
public struct BackoffPolicy: Hashable, Sendable {
  /// The bound of the first wait.
  public var base: Duration
  /// The largest bound.
  public var cap: Duration

  /// Creates a BackoffPolicy from its parts.
  public init(base: Duration, cap: Duration) {
    precondition(base > .zero && cap >= base, "backoff needs 0 < base <= cap")
    self.base = base
    self.cap = cap
  }

  /// 100 ms doubling to 10 s: for connection failures, 5xx and rate limits.
  public static let standard = BackoffPolicy(base: .milliseconds(100), cap: .seconds(10))
  /// 1 s doubling to 5 minutes: for re-registering after a protocol or reducer error.
  public static let protocolErrors = BackoffPolicy(base: .seconds(1), cap: .seconds(300))

  /// The largest wait for the `attempt`-th consecutive failure (1-based).
  /// - Complexity: O(log(cap / base)), whatever `attempt` is.
  public func bound(attempt: Int) -> Duration {
    var bound = base
    var doublings = max(attempt - 1, 0)
    while doublings > 0 && bound < cap {
      bound *= 2
      doublings -= 1
    }
    return min(bound, cap)
  }

  /// A random wait in (0, bound(attempt)], to the nanosecond.
  public func delay(attempt: Int, using random: inout some RandomNumberGenerator) -> Duration {
    let (seconds, attoseconds) = bound(attempt: attempt).components
    let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    return .nanoseconds(Int64.random(in: 1...max(nanoseconds, 1), using: &random))
  }
}
