import Crypto
import EventProtocol
import Foundation

/// The token-based credentials of an Apple Developer account for APNs: a `.p8` signing key, its key id and
/// the team id. A request carries `authorization: bearer <JWT>`, an ES256 JSON Web Token signed with the
/// key (Apple: "Establishing a token-based connection to APNs").
public struct APNsCredentials: Sendable {
  /// The team id (the JWT's `iss`).
  public var teamID: String
  /// The key id (the JWT header's `kid`).
  public var keyID: String
  /// The P-256 signing key from the `.p8` file, as its raw scalar (Crypto's key type is not `Sendable`).
  private let privateKeyBytes: Data

  /// The signing key.
  public func signingKey() throws -> P256.Signing.PrivateKey {
    try P256.Signing.PrivateKey(rawRepresentation: privateKeyBytes)
  }

  /// Credentials from the `.p8` file's PEM text.
  /// - Throws: When the PEM is not a P-256 private key.
  public init(teamID: String, keyID: String, p8 pem: String) throws {
    self.init(teamID: teamID, keyID: keyID, privateKey: try P256.Signing.PrivateKey(pemRepresentation: pem))
  }

  /// Credentials from a key already loaded.
  public init(teamID: String, keyID: String, privateKey: P256.Signing.PrivateKey) {
    self.teamID = teamID
    self.keyID = keyID
    self.privateKeyBytes = privateKey.rawRepresentation
  }
}

/// The provider token APNs requests carry, reused while it is fresh: Apple refuses tokens older than an
/// hour (`403 ExpiredProviderToken`) and throttles a server that makes a new one more often than every 20
/// minutes (`429 TooManyProviderTokenUpdates`), so a token is made again after ``lifetime`` (50 minutes).
/// Pure: time comes in.
public struct APNsTokenCache: Sendable {
  /// How long a token is used before a new one is made.
  public static let lifetime = Duration.seconds(50 * 60)

  private var current: (token: String, issuedAt: Timestamp)?

  /// An empty cache.
  public init() {}

  /// The token to send at `now`: the cached one while younger than ``lifetime``, else a new one.
  public mutating func token(at now: Timestamp, credentials: APNsCredentials) throws -> String {
    if let current, current.issuedAt.duration(to: now) < Self.lifetime, current.issuedAt <= now {
      return current.token
    }
    let token = try Self.makeToken(credentials: credentials, issuedAt: now)
    current = (token, now)
    return token
  }

  /// Forgets the token (APNs answered `ExpiredProviderToken` or `InvalidProviderToken`): the next request
  /// makes a new one.
  public mutating func invalidate() { current = nil }

  /// An ES256 JWT: header `{"alg":"ES256","kid":…}`, claims `{"iss":team,"iat":seconds}`, each base64url
  /// without padding, and the signature as the raw 64-byte r‖s, base64url.
  public static func makeToken(credentials: APNsCredentials, issuedAt: Timestamp) throws -> String {
    let key = try credentials.signingKey()
    return try JSONWebToken.sign(
      header: #"{"alg":"ES256","kid":\#(JSONWebToken.quoted(credentials.keyID))}"#,
      claims: #"{"iss":\#(JSONWebToken.quoted(credentials.teamID)),"iat":\#(issuedAt.sinceEpoch.components.seconds)}"#
    ) { try key.signature(for: $0).rawRepresentation }
  }
}
