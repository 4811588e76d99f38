import EventProtocol

/// A token bucket per user: a pure state machine that takes the time as an input.
///
/// Each user's bucket holds up to ``Policy/burst`` requests and refills at ``Policy/perSecond``. A request
/// that finds it empty is refused with the time until a token is back, which the server sends as
/// `Retry-After`. Full buckets of idle users are forgotten, so memory follows active users.
///
/// ```swift
/// var limiter = RateLimiter(policy: .init(burst: 2, perSecond: 1))
/// limiter.admit("alice", now: t0)   // .admitted
/// limiter.admit("alice", now: t0)   // .admitted
/// limiter.admit("alice", now: t0)   // .limited(retryAfter: 1 s)
/// ```
public struct RateLimiter: Sendable {
  /// How many requests a user may make.
  public struct Policy: Sendable, Hashable {
    /// The most requests in a burst.
    public var burst: Double
    /// The sustained requests per second.
    public var perSecond: Double

    /// Creates a policy.
    public init(burst: Double = 200, perSecond: Double = 50) {
      self.burst = max(burst, 1)
      self.perSecond = max(perSecond, 0.001)
    }
  }

  /// The verdict on one request.
  public enum Decision: Sendable, Hashable {
    /// Go ahead.
    case admitted
    /// Refused: a token is back after this long.
    case limited(retryAfter: Duration)
  }

  private struct Bucket {
    var tokens: Double
    var at: Timestamp
  }

  /// The policy.
  public let policy: Policy
  private var buckets: [UserID: Bucket] = [:]

  /// A limiter with every bucket full.
  public init(policy: Policy = .init()) {
    self.policy = policy
  }

  /// How many users have a bucket that is not full (or was not forgotten yet).
  public var trackedUsers: Int { buckets.count }

  /// Takes a token from `user`'s bucket if there is one.
  public mutating func admit(_ user: UserID, now: Timestamp) -> Decision {
    if buckets.count > 10_000 { forgetFullBuckets(now: now) }
    var bucket = buckets[user] ?? Bucket(tokens: policy.burst, at: now)
    let elapsed = max(0, Double(bucket.at.duration(to: now) / .microseconds(1)) / 1_000_000)
    bucket.tokens = min(policy.burst, bucket.tokens + elapsed * policy.perSecond)
    bucket.at = now
    defer { buckets[user] = bucket }
    guard bucket.tokens >= 1 else {
      let seconds = (1 - bucket.tokens) / policy.perSecond
      return .limited(retryAfter: .microseconds(Int64((seconds * 1_000_000).rounded(.up))))
    }
    bucket.tokens -= 1
    return .admitted
  }

  private mutating func forgetFullBuckets(now: Timestamp) {
    buckets = buckets.filter { _, bucket in
      let elapsed = Double(bucket.at.duration(to: now) / .microseconds(1)) / 1_000_000
      return bucket.tokens + elapsed * policy.perSecond < policy.burst
    }
  }
}
