import EventProtocol
import Synchronization

/// Who a request is from, and whether they may make it now: the authenticator and the rate limiter, in
/// front of every route.
public final class RequestGate: Sendable {
  private let authenticator: any Authenticator
  private let limiter: Mutex<RateLimiter>
  private let now: @Sendable () -> Timestamp

  /// A gate asking `authenticator` and limiting each user by `policy`, on the clock `now`.
  public init(
    authenticator: any Authenticator,
    policy: RateLimiter.Policy,
    now: @escaping @Sendable () -> Timestamp
  ) {
    self.authenticator = authenticator
    self.limiter = Mutex(RateLimiter(policy: policy))
    self.now = now
  }

  /// The mark of the request being served, set once it is admitted (for the connection caps).
  @TaskLocal static var currentMark: AuthenticationMark?

  /// The authenticated user of a request with this `Authorization` header, who has a token left.
  /// - Throws: `UNAUTHORIZED` with the refusal's reason for missing or wrong credentials;
  ///   `SERVICE_UNAVAILABLE` when the authenticator cannot check them now; `RATE_LIMIT_HIT` with the wait
  ///   otherwise.
  public func admit(authorization: String?) async throws(EventAPIError) -> UserID {
    try await admit(authorization: authorization, mark: nil)
  }

  /// ``admit(authorization:)``, telling `mark` (or else the task's ``currentMark``) once the request is admitted.
  func admit(authorization: String?, mark: AuthenticationMark?) async throws(EventAPIError) -> UserID {
    let user: UserID
    switch await authenticator.verdict(authorization: authorization) {
    // A service's own identity (`service:<name>`) is never a user's, whatever an authenticator answers.
    case .user(let proven) where ServiceIdentity.isService(proven):
      throw AuthenticationRefusal.credentialsInvalid.apiError
    case .user(let proven): user = proven
    case .refused(let refusal): throw refusal.apiError
    case .unavailable(let why): throw .serviceUnavailable(why, retryAfter: .seconds(1))
    }
    let decision = limiter.withLock { $0.admit(user, now: now()) }
    if case .limited(let retryAfter) = decision { throw .rateLimitHit(retryAfter: retryAfter) }
    // Only an admitted request makes its connection the user's: connections whose requests are refused stay
    // unauthenticated (evictable, and closed when their time is up).
    (mark ?? Self.currentMark)?.set(user)
    return user
  }
}
