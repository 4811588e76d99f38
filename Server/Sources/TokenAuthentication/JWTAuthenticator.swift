import EventHTTPServer
import EventProtocol
import JWTKit
import Logging

/// Users proven by the team's identity provider: `Authorization: Bearer <JWT>` verified against the keys
/// of a JWKS, then checked by a ``TokenPolicy`` (issuer, audience, expiry, not-before, the user's claim).
///
/// Signatures are verified by jwt-kit; the keys are chosen by the token's `kid` and fetched again as
/// ``KeySetSchedule`` says, so an issuer's key rotation needs no restart. Each refusal names its reason
/// (``AuthenticationRefusal``), which the server answers in the 401's `reason`; nothing it logs holds a
/// token. Until a first key set has been loaded, tokens are answered `503` (``AuthenticationVerdict/unavailable(_:)``),
/// so clients keep their tokens and ask again.
///
/// ```swift
/// let tokens = JWTAuthenticator(
///   keys: .url(URL(string: "https://id.example.com/.well-known/jwks.json")!),
///   policy: try TokenPolicy(issuer: "https://id.example.com/", audiences: ["sync-api"])
/// )
/// let configuration = EventHTTPServerConfiguration(
///   authenticator: AuthenticationSchemes(basic: apiKeys, bearer: tokens)
/// )
/// ```
public final class JWTAuthenticator: Authenticator {
  /// What a token must say.
  public let policy: TokenPolicy
  private let cache: KeySetCache
  private let now: @Sendable () -> Timestamp

  /// The longest `Authorization` value read as a token.
  public static let maximumTokenBytes = 16 * 1024

  /// An authenticator of bearer tokens.
  /// - Parameters:
  ///   - keys: Where the JWKS comes from.
  ///   - policy: What a verified token must say.
  ///   - schedule: When the keys are fetched again.
  ///   - logger: Where key fetches are logged (never a token).
  ///   - now: The server's clock, for `exp`, `nbf` and the fetch schedule.
  public init(
    keys: KeySetSource,
    policy: TokenPolicy,
    schedule: KeySetSchedule.Policy = .init(),
    logger: Logger = Logger(label: "event-server.tokens"),
    now: @escaping @Sendable () -> Timestamp = Timestamp.wallClockNow
  ) {
    self.policy = policy
    self.cache = KeySetCache(source: keys, policy: schedule, logger: logger, now: now)
    self.now = now
  }

  public func user(authorization: String?) async -> UserID? {
    await verdict(authorization: authorization).user
  }

  public func verdict(authorization: String?) async -> AuthenticationVerdict {
    guard let token = Self.bearerToken(in: authorization) else { return .refused(.credentialsMissing) }
    guard let header = TokenHeader(token: token) else { return .refused(.tokenMalformed) }
    guard policy.algorithms.contains(header.algorithm) else { return .refused(.tokenAlgorithmRefused) }
    let keys: VerifyingKeys
    switch await cache.keys(for: header) {
    case .keys(let loaded): keys = loaded
    case .refused(let refusal): return .refused(refusal)
    case .unavailable(let why): return .unavailable(why)
    }
    guard let kid = keys.keyID(for: header) else { return .refused(.tokenUnknownKey) }
    guard keys.accepts(algorithm: header.algorithm, for: kid) else { return .refused(.tokenAlgorithmRefused) }
    let claims: TokenClaims
    do {
      claims = try await keys.collection.verify(String(token), as: TokenClaims.self)
    } catch {
      return .refused(Self.refusal(for: error))
    }
    return policy.check(claims, now: now())
  }

  /// The token of a `Bearer` header (the scheme's name in any case), or `nil`.
  static func bearerToken(in authorization: String?) -> Substring? {
    guard let authorization, authorization.utf8.count <= maximumTokenBytes + 7,
      authorization.utf8.count > 7,
      authorization.utf8.prefix(7).map({ $0 | 0x20 }) == Array("bearer ".utf8)
    else { return nil }
    let token = authorization.dropFirst(7).drop { $0 == " " || $0 == "\t" }
    let end = token.lastIndex { $0 != " " && $0 != "\t" }.map { token.index(after: $0) } ?? token.startIndex
    return token.isEmpty ? nil : token[..<end]
  }

  /// The refusal a failed verification means.
  static func refusal(for error: any Error) -> AuthenticationRefusal {
    guard let error = error as? JWTError else { return .tokenMalformed }
    switch error.errorType {
    case .signatureVerificationFailed: return .tokenBadSignature
    case .unknownKID, .missingKIDHeader, .noKeyProvided: return .tokenUnknownKey
    case .unsupportedAlgorithm, .signingAlgorithmFailure: return .tokenAlgorithmRefused
    case .malformedToken, .invalidHeaderField, .invalidBool: return .tokenMalformed
    default: return .tokenBadSignature
    }
  }
}
