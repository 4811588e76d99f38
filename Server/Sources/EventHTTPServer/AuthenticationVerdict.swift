import EventProtocol

/// What an ``Authenticator`` concluded about a request's credentials: the user they prove, or why it
/// refuses them, or that it cannot tell right now.
///
/// ```swift
/// switch await authenticator.verdict(authorization: header) {
/// case .user(let user): serve(user)
/// case .refused(let refusal): answer401(refusal.reason)
/// case .unavailable(let why): answer503(why)
/// }
/// ```
public enum AuthenticationVerdict: Hashable, Sendable {
  /// The credentials prove this user.
  case user(UserID)
  /// The credentials prove nobody, for this reason: `401 UNAUTHORIZED` with the refusal's reason.
  case refused(AuthenticationRefusal)
  /// The authenticator cannot check credentials right now (its keys could not be loaded yet): `503`, so a
  /// client keeps its credentials and asks again, rather than stopping as it does on a 401.
  case unavailable(String)

  /// The user, when the verdict is ``user(_:)``.
  public var user: UserID? {
    if case .user(let user) = self { user } else { nil }
  }
}

/// Why credentials were refused: a precise code for the wire's `reason` and a message that holds no part of
/// the credentials.
///
/// Every refusal is answered `401 UNAUTHORIZED`; ``reason`` tells a client (and an operator reading the
/// debug log) which check failed. New reasons can be added without breaking callers.
public struct AuthenticationRefusal: Hashable, Sendable, CustomStringConvertible {
  /// The code on the wire (`"TOKEN_EXPIRED"`).
  public let reason: String
  /// What failed, for people: never the token, a key or a claim's value.
  public let message: String

  /// A refusal with this wire code and message; prefer the static members.
  public init(reason: String, message: String) {
    self.reason = reason
    self.message = message
  }

  /// No `Authorization` header, or one of a scheme the authenticator does not take.
  public static let credentialsMissing = AuthenticationRefusal(
    reason: "CREDENTIALS_MISSING",
    message: "no credentials this server takes"
  )
  /// The credentials were read but prove nobody (an unknown user, a wrong key).
  public static let credentialsInvalid = AuthenticationRefusal(
    reason: "CREDENTIALS_INVALID",
    message: "Invalid API key"
  )
  /// The token is not three base64url parts of JSON.
  public static let tokenMalformed = AuthenticationRefusal(reason: "TOKEN_MALFORMED", message: "the token is malformed")
  /// The token's `alg` is not one the server accepts (`none` never is).
  public static let tokenAlgorithmRefused = AuthenticationRefusal(
    reason: "TOKEN_ALGORITHM_REFUSED",
    message: "the token's algorithm is not accepted"
  )
  /// No key of the key set has the token's `kid`, even after the set was fetched again.
  public static let tokenUnknownKey = AuthenticationRefusal(
    reason: "TOKEN_UNKNOWN_KEY",
    message: "the token is signed by a key this server does not know"
  )
  /// The signature does not verify with the key its `kid` names.
  public static let tokenBadSignature = AuthenticationRefusal(
    reason: "TOKEN_BAD_SIGNATURE",
    message: "the token's signature does not verify"
  )
  /// The token's `exp` has passed.
  public static let tokenExpired = AuthenticationRefusal(reason: "TOKEN_EXPIRED", message: "the token expired")
  /// The token's `nbf` is still to come.
  public static let tokenNotYetValid = AuthenticationRefusal(
    reason: "TOKEN_NOT_YET_VALID",
    message: "the token is not valid yet"
  )
  /// The token's `iss` is not the configured issuer.
  public static let tokenWrongIssuer = AuthenticationRefusal(
    reason: "TOKEN_WRONG_ISSUER",
    message: "the token is from another issuer"
  )
  /// None of the token's `aud` is a configured audience.
  public static let tokenWrongAudience = AuthenticationRefusal(
    reason: "TOKEN_WRONG_AUDIENCE",
    message: "the token is meant for another audience"
  )

  /// A claim the server needs (`exp`, the user's claim) is missing or not of its type.
  /// - Parameter name: The claim's name (a name, never its value).
  public static func tokenClaimMissing(_ name: String) -> AuthenticationRefusal {
    AuthenticationRefusal(reason: "TOKEN_CLAIM_MISSING", message: "the token has no usable '\(name)' claim")
  }

  public var description: String { "\(reason): \(message)" }

  /// This refusal as the API's error: `UNAUTHORIZED` with its reason.
  public var apiError: EventAPIError { .unauthorized(message, reason: reason) }
}
