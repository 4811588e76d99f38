import Crypto
import EventProtocol
import Foundation
import JWTKit
import Synchronization
import Testing
import _CryptoExtras

@testable import TokenAuthentication

/// An identity provider for tests: RSA and P-256 signing keys, the JWKS of their public halves (which the
/// test can change, as a rotation does), and tokens signed with any of them.
final class TestIdentityProvider: Sendable {
  static let issuer = "https://id.test/"
  static let audience = "sync-api"

  /// One signing key: its id, its algorithm and its JWK (public half).
  struct Key: Sendable {
    let id: String
    let algorithm: String
    let jwk: String
  }

  private let signers = JWTKeyCollection()
  private let published = Mutex<[Key]>([])
  private let unpublished = Mutex<[Key]>([])
  private let fetches = Mutex(0)
  private let failing = Mutex(false)

  /// RSA keys take a while to make: the suite's tests share these.
  static let rsa = try! JWTKit.Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))
  static let rsaNext = try! JWTKit.Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))

  /// The JWKS now published.
  var jwks: String {
    "{\"keys\":[" + published.withLock { $0.map(\.jwk) }.joined(separator: ",") + "]}"
  }

  /// How many times the key set was read.
  var fetchCount: Int { fetches.withLock { $0 } }

  /// Makes the key set's reads fail (an identity provider down) or succeed again.
  func setFailing(_ value: Bool) { failing.withLock { $0 = value } }

  /// The key set as a server reads it: the JWKS now published, each read counted.
  var source: KeySetSource {
    KeySetSource(description: "test identity provider") {
      self.fetches.withLock { $0 += 1 }
      if self.failing.withLock({ $0 }) { throw KeySetError("the identity provider is down") }
      return Data(self.jwks.utf8)
    }
  }

  /// Adds an RSA key (RS256) that signs tokens; `publish` puts its public half in the JWKS.
  @discardableResult
  func addRSA(_ key: JWTKit.Insecure.RSA.PrivateKey, id: String, publish: Bool = true) async throws -> Key {
    await signers.add(rsa: key, digestAlgorithm: .sha256, kid: JWKIdentifier(string: id))
    let primitives = try key.publicKey.getKeyPrimitives()
    let jwk = """
      {"kty":"RSA","kid":"\(id)","alg":"RS256","use":"sig",\
      "n":"\(Self.base64URL(primitives.modulus))","e":"\(Self.base64URL(primitives.publicExponent))"}
      """
    let added = Key(id: id, algorithm: "RS256", jwk: jwk)
    if publish { published.withLock { $0.append(added) } } else { unpublished.withLock { $0.append(added) } }
    return added
  }

  /// Adds a P-256 key (ES256) that signs tokens; `publish` puts its public half in the JWKS.
  @discardableResult
  func addP256(id: String, publish: Bool = true) async throws -> Key {
    let key = ES256PrivateKey()
    await signers.add(ecdsa: key, kid: JWKIdentifier(string: id))
    let parameters = try #require(key.parameters)
    let jwk = """
      {"kty":"EC","kid":"\(id)","alg":"ES256","use":"sig","crv":"P-256","x":"\(parameters.x)","y":"\(parameters.y)"}
      """
    let added = Key(id: id, algorithm: "ES256", jwk: jwk)
    if publish { published.withLock { $0.append(added) } }
    return added
  }

  /// Publishes the key `id` added earlier without publishing it (a rotation's first step).
  func publishRSA(_ id: String) {
    let key = unpublished.withLock { keys in keys.first { $0.id == id } }
    if let key { published.withLock { $0.append(key) } }
  }

  /// Stops publishing the key `id` (a rotation's last step).
  func unpublish(_ id: String) { published.withLock { $0.removeAll { $0.id == id } } }

  /// The claims of a good token for `user` at `now`, valid for a minute.
  static func claims(for user: String, now: Timestamp) -> TokenClaims {
    let seconds = Double(now.sinceEpoch / .milliseconds(1)) / 1000
    return TokenClaims(
      issuer: issuer,
      audiences: [audience],
      expiresAt: seconds + 60,
      notBefore: seconds - 1,
      strings: ["sub": user]
    )
  }

  /// `claims` signed by the key `keyID`, whose id the header names.
  func token(_ claims: TokenClaims, keyID: String) async throws -> String {
    try await signers.sign(claims, kid: JWKIdentifier(string: keyID))
  }

  static func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
      .replacingOccurrences(of: "=", with: "")
  }

  /// `text` as base64url (a header or a payload written by hand).
  static func base64URL(_ text: String) -> String { base64URL(Data(text.utf8)) }
}

/// A clock the test moves by hand, as the server's `now`.
final class TestNow: Sendable {
  private let current: Mutex<Timestamp>

  init(_ start: Timestamp = Timestamp(secondsSinceEpoch: 1_800_000_000)) {
    current = Mutex(start)
  }

  var now: Timestamp { current.withLock { $0 } }

  func advance(by duration: Duration) { current.withLock { $0 = $0.advanced(by: duration) } }

  var closure: @Sendable () -> Timestamp { { self.now } }
}
