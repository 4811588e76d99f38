import EventServer

/// How a sender goes on with one push after each platform answer: finish, wait and send again, or renew its
/// credentials and send again. Pure: the senders perform the steps.
///
/// Throttling (429) and platform failures (5xx, no connection) are retried after the platform's
/// `Retry-After` when it gave one, else after a backoff doubling from ``firstBackoff`` to
/// ``maximumBackoff``; at most ``maximumAttempts`` sends in all, after which the push is given up
/// (``PushDelivery/failed(_:)``; the token is kept and the next event pushes again).
public struct PushRetryPolicy: Sendable, Hashable {
  /// What the sender does next.
  public enum Step: Sendable, Hashable {
    /// Stop: this is what the push came to.
    case finish(PushDelivery)
    /// Send again after waiting this long.
    case wait(Duration)
    /// Make new credentials (a provider token, an access token) and send again at once.
    case renewCredentials
  }

  /// The most sends of one push, the first included.
  public var maximumAttempts: Int
  /// The wait before the second send when the platform named none.
  public var firstBackoff: Duration
  /// The longest wait between two sends.
  public var maximumBackoff: Duration

  /// A policy; the defaults send a push at most four times over about seven seconds.
  public init(maximumAttempts: Int = 4, firstBackoff: Duration = .seconds(1), maximumBackoff: Duration = .seconds(60)) {
    self.maximumAttempts = max(1, maximumAttempts)
    self.firstBackoff = firstBackoff
    self.maximumBackoff = maximumBackoff
  }

  /// The step after `answer` to send number `attempt` (1 for the first).
  public func step(after answer: PushAnswer, attempt: Int) -> Step {
    let isLast = attempt >= maximumAttempts
    switch answer {
    case .accepted:
      return .finish(.accepted)
    case .tokenInvalid:
      return .finish(.tokenInvalid)
    case .refused(let reason):
      return .finish(.failed(reason))
    case .renewCredentials:
      return isLast ? .finish(.failed("credentials refused \(attempt) times")) : .renewCredentials
    case .retry(let after):
      if isLast { return .finish(.failed("still failing after \(attempt) attempts")) }
      return .wait(min(after ?? backoff(beforeAttempt: attempt + 1), maximumBackoff))
    }
  }

  /// The wait before send number `attempt` (2 or more) when the platform named none.
  func backoff(beforeAttempt attempt: Int) -> Duration {
    let doublings = min(max(attempt - 2, 0), 30)
    return min(firstBackoff * (1 << doublings), maximumBackoff)
  }
}
