import EventHTTPServer
import EventProtocol
import Foundation
import Testing

@testable import TokenAuthentication

/// Bearer tokens signed by real RSA and P-256 keys, verified against a JWKS the test publishes and rotates.
@Suite("Bearer tokens are verified against the identity provider's keys")
struct JWTAuthenticatorTests {
  private let policy = try! TokenPolicy(
    issuer: TestIdentityProvider.issuer,
    audiences: [TestIdentityProvider.audience]
  )

  private func authenticator(_ provider: TestIdentityProvider, clock: TestNow) -> JWTAuthenticator {
    JWTAuthenticator(keys: provider.source, policy: policy, now: clock.closure)
  }

  @Test("an RS256 and an ES256 token each prove their user; the key set is read once for both")
  func bothAlgorithms() async throws {
    let provider = TestIdentityProvider()
    try await provider.addRSA(TestIdentityProvider.rsa, id: "rsa-1")
    try await provider.addP256(id: "ec-1")
    let clock = TestNow()
    let tokens = authenticator(provider, clock: clock)
    let rsa = try await provider.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "rsa-1")
    let ec = try await provider.token(TestIdentityProvider.claims(for: "bob", now: clock.now), keyID: "ec-1")
    #expect(await tokens.verdict(authorization: "Bearer \(rsa)") == .user("alice"))
    #expect(await tokens.verdict(authorization: "bearer  \(ec) ") == .user("bob"))
    #expect(await tokens.user(authorization: "Bearer \(ec)") == "bob")
    #expect(provider.fetchCount == 1)
  }

  @Test("a token that expires while in use is refused as expired once the clock passes exp and the leeway")
  func expiry() async throws {
    let provider = TestIdentityProvider()
    try await provider.addP256(id: "ec-1")
    let clock = TestNow()
    let tokens = authenticator(provider, clock: clock)
    let token = try await provider.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "ec-1")
    #expect(await tokens.verdict(authorization: "Bearer \(token)") == .user("alice"))
    clock.advance(by: .seconds(60 + 29))
    #expect(await tokens.verdict(authorization: "Bearer \(token)") == .user("alice"))
    clock.advance(by: .seconds(1))
    #expect(await tokens.verdict(authorization: "Bearer \(token)") == .refused(.tokenExpired))
  }

  @Test("a signature by another key under a known kid, and a payload edited after signing, are bad signatures")
  func badSignatures() async throws {
    let provider = TestIdentityProvider()
    try await provider.addP256(id: "ec-1")
    let impostor = TestIdentityProvider()
    try await impostor.addP256(id: "ec-1")
    let clock = TestNow()
    let tokens = authenticator(provider, clock: clock)
    let forged = try await impostor.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "ec-1")
    #expect(await tokens.verdict(authorization: "Bearer \(forged)") == .refused(.tokenBadSignature))

    let good = try await provider.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "ec-1")
    var parts = good.split(separator: ".").map(String.init)
    var claims = TestIdentityProvider.claims(for: "mallory", now: clock.now)
    claims.strings["sub"] = "mallory"
    parts[1] = TestIdentityProvider.base64URL(try JSONEncoder().encode(claims))
    #expect(
      await tokens.verdict(authorization: "Bearer \(parts.joined(separator: "."))") == .refused(.tokenBadSignature)
    )
  }

  @Test("alg none, a shared-secret alg, and an alg that does not fit the key are refused before any verifying")
  func algorithms() async throws {
    let provider = TestIdentityProvider()
    try await provider.addRSA(TestIdentityProvider.rsa, id: "rsa-1")
    try await provider.addP256(id: "ec-1")
    let clock = TestNow()
    let tokens = authenticator(provider, clock: clock)
    let good = try await provider.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "ec-1")
    let parts = good.split(separator: ".").map(String.init)
    func withHeader(_ json: String, signature: String = parts[2]) -> String {
      "Bearer \(TestIdentityProvider.base64URL(json)).\(parts[1]).\(signature)"
    }
    #expect(
      await tokens.verdict(authorization: withHeader(#"{"alg":"none","kid":"ec-1"}"#, signature: "x"))
        == .refused(.tokenAlgorithmRefused)
    )
    #expect(
      await tokens.verdict(authorization: withHeader(#"{"alg":"HS256","kid":"ec-1"}"#))
        == .refused(.tokenAlgorithmRefused)
    )
    #expect(
      await tokens.verdict(authorization: withHeader(#"{"alg":"RS256","kid":"ec-1"}"#))
        == .refused(.tokenAlgorithmRefused)
    )
    #expect(
      await tokens.verdict(authorization: withHeader(#"{"alg":"ES256","kid":"rsa-1"}"#))
        == .refused(.tokenAlgorithmRefused)
    )
    #expect(await tokens.verdict(authorization: "Bearer not-a-token") == .refused(.tokenMalformed))
    #expect(await tokens.verdict(authorization: "Basic YWxpY2U6c2VjcmV0") == .refused(.credentialsMissing))
    #expect(await tokens.verdict(authorization: nil) == .refused(.credentialsMissing))
  }

  @Test("a rotated key is taken without a restart: an unknown kid reads the set again, at most once per 30 s")
  func rotation() async throws {
    let provider = TestIdentityProvider()
    try await provider.addRSA(TestIdentityProvider.rsa, id: "rsa-1")
    let clock = TestNow()
    let tokens = authenticator(provider, clock: clock)
    let old = try await provider.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "rsa-1")
    #expect(await tokens.verdict(authorization: "Bearer \(old)") == .user("alice"))
    #expect(provider.fetchCount == 1)

    // The issuer signs with a key it has not published yet: unknown, and the set was just read.
    try await provider.addRSA(TestIdentityProvider.rsaNext, id: "rsa-2", publish: false)
    clock.advance(by: .seconds(30))
    let new = try await provider.token(TestIdentityProvider.claims(for: "bob", now: clock.now), keyID: "rsa-2")
    #expect(await tokens.verdict(authorization: "Bearer \(new)") == .refused(.tokenUnknownKey))
    #expect(provider.fetchCount == 2)
    // Made-up key ids within the next 30 s cost no fetch.
    for _ in 0..<20 {
      #expect(await tokens.verdict(authorization: "Bearer \(new)") == .refused(.tokenUnknownKey))
    }
    #expect(provider.fetchCount == 2)

    // Published (and the old key withdrawn): the next unknown-key token 30 s later reads the set and passes.
    provider.unpublish("rsa-1")
    provider.publishRSA("rsa-2")
    clock.advance(by: .seconds(30))
    let newer = try await provider.token(TestIdentityProvider.claims(for: "bob", now: clock.now), keyID: "rsa-2")
    #expect(await tokens.verdict(authorization: "Bearer \(newer)") == .user("bob"))
    #expect(provider.fetchCount == 3)
    let oldAgain = try await provider.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "rsa-1")
    #expect(await tokens.verdict(authorization: "Bearer \(oldAgain)") == .refused(.tokenUnknownKey))
  }

  @Test("keys not loadable yet answer unavailable (a 503, not a 401); a failed refresh keeps the keys in use")
  func keysUnavailable() async throws {
    let provider = TestIdentityProvider()
    try await provider.addP256(id: "ec-1")
    provider.setFailing(true)
    let clock = TestNow()
    let tokens = authenticator(provider, clock: clock)
    let token = try await provider.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "ec-1")
    guard case .unavailable = await tokens.verdict(authorization: "Bearer \(token)") else {
      Issue.record("not unavailable without keys")
      return
    }
    #expect(provider.fetchCount == 1)
    guard case .unavailable = await tokens.verdict(authorization: "Bearer \(token)") else {
      Issue.record("not unavailable within the retry interval")
      return
    }
    #expect(provider.fetchCount == 1, "no second read within 5 s")
    provider.setFailing(false)
    clock.advance(by: .seconds(5))
    #expect(await tokens.verdict(authorization: "Bearer \(token)") == .user("alice"))
    #expect(provider.fetchCount == 2)

    // Five minutes on, the refresh fails: the token is still taken with the keys in use.
    provider.setFailing(true)
    clock.advance(by: .seconds(300))
    let later = try await provider.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "ec-1")
    #expect(await tokens.verdict(authorization: "Bearer \(later)") == .user("alice"))
    #expect(await tokens.verdict(authorization: "Bearer \(later)") == .user("alice"))
  }

  @Test("API keys and tokens side by side: each scheme goes to its own authenticator")
  func schemes() async throws {
    let provider = TestIdentityProvider()
    try await provider.addP256(id: "ec-1")
    let clock = TestNow()
    let both = AuthenticationSchemes(
      basic: try APIKeys(["carol": "carol-secret-key"]),
      bearer: authenticator(provider, clock: clock)
    )
    let token = try await provider.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "ec-1")
    let basic = "Basic " + Data("carol:carol-secret-key".utf8).base64EncodedString()
    let wrong = "Basic " + Data("carol:not-her-key-at-all".utf8).base64EncodedString()
    #expect(await both.verdict(authorization: "Bearer \(token)") == .user("alice"))
    #expect(await both.verdict(authorization: basic) == .user("carol"))
    #expect(await both.verdict(authorization: wrong) == .refused(.credentialsInvalid))
    #expect(await both.verdict(authorization: "Digest abc") == .refused(.credentialsMissing))
    #expect(await both.verdict(authorization: nil) == .refused(.credentialsMissing))
    let keysOnly = AuthenticationSchemes(basic: try APIKeys(["carol": "carol-secret-key"]), bearer: nil)
    #expect(await keysOnly.verdict(authorization: "Bearer \(token)") == .refused(.credentialsMissing))
  }
}
