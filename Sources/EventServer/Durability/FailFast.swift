import EventProtocol

/// The fresh failure of a database that did not complete a transaction (unreachable, out of time): for a
/// moment after it, requests fail at once with it instead of each waiting for the database's deadline in
/// turn. A cluster node's turns (``TurnCycle``) and a single server's stored batches (``StoredBatches``) keep
/// one each.
///
/// ```swift
/// var failFast = FailFast()
/// failFast.failed(with: failure, now: now, for: .seconds(1))
/// failFast.refusal(now: now)                         // failure
/// failFast.refusal(now: now.advanced(by: .seconds(1)))  // nil, and forgotten
/// ```
struct FailFast: Sendable, Equatable {
  private struct Refusal: Sendable, Equatable {
    var until: Timestamp
    var failure: ServerLogError
  }

  private var refusal: Refusal?

  /// Nothing failed.
  init() {}

  /// Until when requests fail at once, while they do.
  var until: Timestamp? { refusal?.until }

  /// A transaction failed with `failure` at `now`: requests fail with it for `duration`.
  mutating func failed(with failure: ServerLogError, now: Timestamp, for duration: Duration) {
    refusal = Refusal(until: now.advanced(by: duration), failure: failure)
  }

  /// The failure a request gets now, if the moment is not over (forgotten once it is).
  mutating func refusal(now: Timestamp) -> ServerLogError? {
    guard let refusal else { return nil }
    if now < refusal.until { return refusal.failure }
    self.refusal = nil
    return nil
  }

  /// The database answered again (or the state that failed was replaced): nothing is refused.
  mutating func forget() {
    refusal = nil
  }
}
