import EventHTTPServer
import EventProtocol
import Testing

@testable import TokenAuthentication

/// What a verified token must say, checked on the server's clock: each check refuses with its own reason,
/// in a fixed order, and the leeway is exactly as wide as configured.
@Suite("Token claims are checked by a pure policy")
struct TokenPolicyTests {
  private let now = Timestamp(secondsSinceEpoch: 1_800_000_000)
  private let policy = try! TokenPolicy(issuer: "https://id.test/", audiences: ["sync-api"], leeway: .seconds(30))

  private var good: TokenClaims {
    TokenClaims(
      issuer: "https://id.test/",
      audiences: ["sync-api"],
      expiresAt: 1_800_000_060,
      notBefore: 1_799_999_990,
      strings: ["sub": "alice", "email": "alice@example.com"]
    )
  }

  private func edited(_ edit: (inout TokenClaims) -> Void) -> TokenClaims {
    var claims = good
    edit(&claims)
    return claims
  }

  @Test("good claims prove the user their `sub` names")
  func goodClaims() {
    #expect(policy.check(good, now: now) == .user("alice"))
  }

  @Test(
    "each failed check refuses with its reason",
    arguments: [
      ("no exp", AuthenticationRefusal.tokenClaimMissing("exp")),
      ("expired past the leeway", .tokenExpired),
      ("not before, past the leeway", .tokenNotYetValid),
      ("another issuer", .tokenWrongIssuer),
      ("no issuer", .tokenWrongIssuer),
      ("another audience", .tokenWrongAudience),
      ("no audience", .tokenWrongAudience),
      ("no sub", .tokenClaimMissing("sub")),
      ("an empty sub", .tokenClaimMissing("sub")),
    ]
  )
  func refusals(_ case: String, _ refusal: AuthenticationRefusal) {
    let claims = edited { claims in
      switch `case` {
      case "no exp": claims.expiresAt = nil
      case "expired past the leeway": claims.expiresAt = 1_800_000_000 - 30
      case "not before, past the leeway": claims.notBefore = 1_800_000_000 + 31
      case "another issuer": claims.issuer = "https://id.other/"
      case "no issuer": claims.issuer = nil
      case "another audience": claims.audiences = ["billing"]
      case "no audience": claims.audiences = []
      case "no sub": claims.strings["sub"] = nil
      case "an empty sub": claims.strings["sub"] = ""
      default: Issue.record("unknown case \(`case`)")
      }
    }
    #expect(policy.check(claims, now: now) == .refused(refusal))
  }

  @Test("the leeway takes a token up to 30 s past exp and 30 s before nbf, and not a second more")
  func leeway() {
    #expect(policy.check(edited { $0.expiresAt = 1_800_000_000 - 29 }, now: now) == .user("alice"))
    #expect(policy.check(edited { $0.expiresAt = 1_800_000_000 - 30 }, now: now) == .refused(.tokenExpired))
    #expect(policy.check(edited { $0.notBefore = 1_800_000_000 + 30 }, now: now) == .user("alice"))
    #expect(policy.check(edited { $0.notBefore = 1_800_000_000 + 31 }, now: now) == .refused(.tokenNotYetValid))
  }

  @Test("an expired token is refused as expired before its other faults are looked at")
  func order() {
    let claims = edited {
      $0.expiresAt = 1
      $0.issuer = "https://id.other/"
      $0.audiences = []
    }
    #expect(policy.check(claims, now: now) == .refused(.tokenExpired))
  }

  @Test("one matching audience among several is enough; the user can come from a configured claim")
  func audiencesAndClaim() throws {
    #expect(policy.check(edited { $0.audiences = ["billing", "sync-api"] }, now: now) == .user("alice"))
    let byEmail = try TokenPolicy(issuer: "https://id.test/", audiences: ["sync-api"], userClaim: "email")
    #expect(byEmail.check(good, now: now) == .user("alice@example.com"))
    #expect(byEmail.check(edited { $0.strings["email"] = nil }, now: now) == .refused(.tokenClaimMissing("email")))
  }

  @Test("a policy refuses `none`, a shared-secret algorithm, no audience and a wide leeway, each in one line")
  func badPolicies() {
    #expect(throws: TokenPolicyError.self) {
      try TokenPolicy(issuer: "https://id.test/", audiences: ["a"], algorithms: ["none"])
    }
    #expect(throws: TokenPolicyError.self) {
      try TokenPolicy(issuer: "https://id.test/", audiences: ["a"], algorithms: ["RS256", "HS256"])
    }
    #expect(throws: TokenPolicyError.self) { try TokenPolicy(issuer: "https://id.test/", audiences: []) }
    #expect(throws: TokenPolicyError.self) { try TokenPolicy(issuer: "", audiences: ["a"]) }
    #expect(throws: TokenPolicyError.self) {
      try TokenPolicy(issuer: "https://id.test/", audiences: ["a"], leeway: .seconds(301))
    }
    do {
      _ = try TokenPolicy(issuer: "https://id.test/", audiences: ["a"], algorithms: ["HS256"])
    } catch {
      #expect(error.message.hasPrefix("algorithm 'HS256' is not one of"))
    }
  }

  @Test("a header is read for its alg and kid only; anything but three parts with a JSON header is nil")
  func headers() {
    let header = TestIdentityProvider.base64URL(#"{"alg":"RS256","kid":"k1","typ":"JWT"}"#)
    #expect(TokenHeader(token: "\(header).e30.c2ln") == TokenHeader(algorithm: "RS256", keyID: "k1"))
    #expect(TokenHeader(token: "\(TestIdentityProvider.base64URL(#"{"alg":"ES256"}"#)).e30.c2ln")?.keyID == nil)
    #expect(TokenHeader(token: "\(header).e30") == nil)
    #expect(TokenHeader(token: "\(header).e30.") == nil)
    #expect(TokenHeader(token: "bm90IGpzb24.e30.c2ln") == nil)
    #expect(TokenHeader(token: "\(TestIdentityProvider.base64URL(#"{"alg":"RS256","kid":7}"#)).e30.c2ln") == nil)
    #expect(TokenHeader(token: "\(TestIdentityProvider.base64URL(#"{"kid":"k1"}"#)).e30.c2ln") == nil)
  }
}
