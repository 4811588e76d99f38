import EventHTTPServer
import EventProtocol

/// What a verified token must say to prove a user: its issuer, one of its audiences, its time window, and
/// the claim that names the user.
///
/// ```swift
/// let policy = TokenPolicy(issuer: "https://id.example.com/", audiences: ["sync-api"], userClaim: "sub")
/// ```
///
/// ``check(_:now:)`` is pure: the same claims and the same `now` give the same verdict.
public struct TokenPolicy: Sendable, Equatable {
  /// The `iss` every token must carry exactly.
  public var issuer: String
  /// The audiences this server is; a token's `aud` must hold at least one of them.
  public var audiences: Set<String>
  /// The claim whose string value is the user's id (`sub` unless configured).
  public var userClaim: String
  /// The claim naming the user's tenant (a team, an organisation), if tenants come from the token: the
  /// user's id is then `tenant/user`, so the tenant is the partition key of an application partitioned by
  /// tenant (`UserID.team` in `SampleApps`), and no token can name a user of another tenant.
  public var tenantClaim: String?
  /// The algorithms a token may be signed with (`RS256` and `ES256` unless configured; never `none`).
  public var algorithms: Set<String>
  /// How far the server's clock may be from the issuer's: a token is taken up to this long after its
  /// `exp` and this long before its `nbf`.
  public var leeway: Duration

  /// The algorithms accepted unless configured.
  public static let defaultAlgorithms: Set<String> = ["RS256", "ES256"]
  /// The algorithms a policy can accept: asymmetric ones only, so the key set holds no secret.
  public static let supportedAlgorithms: Set<String> = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
  ]

  /// A policy.
  /// - Parameters:
  ///   - issuer: The `iss` every token must carry.
  ///   - audiences: The audiences this server is (at least one).
  ///   - userClaim: The claim naming the user.
  ///   - tenantClaim: The claim naming the user's tenant, when tenants come from the token.
  ///   - algorithms: The accepted algorithms, a subset of ``supportedAlgorithms``.
  ///   - leeway: The clock skew allowed around `exp` and `nbf` (at most five minutes).
  /// - Throws: ``TokenPolicyError`` for an empty issuer, no audience, an empty claim name, an algorithm
  ///   outside ``supportedAlgorithms`` (`none` and `HS256` among them), or a leeway outside 0...300 s.
  public init(
    issuer: String,
    audiences: Set<String>,
    userClaim: String = "sub",
    tenantClaim: String? = nil,
    algorithms: Set<String> = TokenPolicy.defaultAlgorithms,
    leeway: Duration = .seconds(30)
  ) throws(TokenPolicyError) {
    guard !issuer.isEmpty else { throw TokenPolicyError("the issuer is empty") }
    guard !audiences.isEmpty, !audiences.contains("") else { throw TokenPolicyError("no audience, or an empty one") }
    guard !userClaim.isEmpty else { throw TokenPolicyError("the user claim's name is empty") }
    guard tenantClaim?.isEmpty != true, tenantClaim != userClaim else {
      throw TokenPolicyError("the tenant claim's name is empty or the user claim's")
    }
    guard !algorithms.isEmpty else { throw TokenPolicyError("no algorithm") }
    if let refused = algorithms.subtracting(Self.supportedAlgorithms).sorted().first {
      throw TokenPolicyError(
        "algorithm '\(refused)' is not one of \(Self.supportedAlgorithms.sorted().joined(separator: ", "))"
      )
    }
    guard leeway >= .zero, leeway <= .seconds(300) else { throw TokenPolicyError("the leeway is not 0 to 300 s") }
    self.issuer = issuer
    self.audiences = audiences
    self.userClaim = userClaim
    self.tenantClaim = tenantClaim
    self.algorithms = algorithms
    self.leeway = leeway
  }

  /// Whether a verified token's claims prove a user at `now`: the user, or the first check that failed, in
  /// this order: `exp` (required), `nbf`, `iss`, `aud`, the user's claim, the tenant's claim (when
  /// configured: a non-empty string of at most 64 bytes without `/`; the user is then `tenant/user`).
  /// - Parameters:
  ///   - claims: The claims of a token whose signature verified.
  ///   - now: The server's clock.
  /// - Returns: ``AuthenticationVerdict/user(_:)`` or ``AuthenticationVerdict/refused(_:)``.
  public func check(_ claims: TokenClaims, now: Timestamp) -> AuthenticationVerdict {
    let seconds = Double(now.sinceEpoch / .milliseconds(1)) / 1000
    let slack = Double(leeway / .milliseconds(1)) / 1000
    guard let expiresAt = claims.expiresAt else { return .refused(.tokenClaimMissing("exp")) }
    guard seconds < expiresAt + slack else { return .refused(.tokenExpired) }
    if let notBefore = claims.notBefore, seconds + slack < notBefore { return .refused(.tokenNotYetValid) }
    guard claims.issuer == issuer else { return .refused(.tokenWrongIssuer) }
    guard claims.audiences.contains(where: audiences.contains) else { return .refused(.tokenWrongAudience) }
    guard let user = claims.strings[userClaim], !user.isEmpty, user.utf8.count <= 255 else {
      return .refused(.tokenClaimMissing(userClaim))
    }
    guard let tenantClaim else { return .user(UserID(user)) }
    guard let tenant = claims.strings[tenantClaim], !tenant.isEmpty, tenant.utf8.count <= 64, !tenant.contains("/")
    else { return .refused(.tokenClaimMissing(tenantClaim)) }
    return .user(UserID("\(tenant)/\(user)"))
  }
}

/// A ``TokenPolicy`` that cannot be made, with what is wrong.
public struct TokenPolicyError: Error, Equatable, CustomStringConvertible {
  /// What is wrong, in one line.
  public let message: String

  init(_ message: String) {
    self.message = message
  }

  public var description: String { message }
}
