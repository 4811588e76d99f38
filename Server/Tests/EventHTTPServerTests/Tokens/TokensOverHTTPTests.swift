import EventProtocol
import EventServer
import Foundation
import Logging
import Synchronization
import TestScheduling
import Testing

@testable import EventHTTPServer
@testable import TokenAuthentication

/// The server takes the identity provider's tokens beside API keys: a good token registers, each refusal is
/// a 401 naming its reason with a bearer challenge, keys not loadable yet are a 503, and no log line holds a
/// token.
@Suite("Bearer tokens over HTTP", .serialized, .hangGuard)
struct TokensOverHTTPTests {
  private func reason(_ answer: RawHTTP.Answer) -> String? {
    (try? JSONSerialization.jsonObject(with: answer.body) as? [String: Any])?["reason"] as? String
  }

  @Test("a token registers; expired, wrong-audience, unknown-key and forged tokens are 401s with their reasons")
  func refusalsOverHTTP() async throws {
    let provider = TestIdentityProvider()
    try await provider.addP256(id: "ec-1")
    let impostor = TestIdentityProvider()
    try await impostor.addP256(id: "ec-1")
    try await impostor.addP256(id: "ec-9")
    let clock = TestNow(Timestamp.wallClockNow())
    let handler = KeepingLogHandler()
    var logger = Logger(label: "tokens-test") { _ in handler }
    logger.logLevel = .trace
    let tokens = JWTAuthenticator(
      keys: provider.source,
      policy: try TokenPolicy(issuer: TestIdentityProvider.issuer, audiences: [TestIdentityProvider.audience]),
      logger: logger,
      now: clock.closure
    )
    var configuration = EventHTTPServerConfiguration(
      authenticator: AuthenticationSchemes(basic: try APIKeys(["carol": "carol-secret-key"]), bearer: tokens)
    )
    configuration.port = 0
    configuration.adminPort = 0
    configuration.snapshotInterval = nil
    let server = EventHTTPServer(
      application: KanbanServer(team: ["alice", "carol"]),
      configuration: configuration,
      logger: logger
    )
    let started = try await RunningWithAdmin.start(server)
    let http = RawHTTP(base: URL(string: "http://127.0.0.1:\(started.port)")!)

    let good = try await provider.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "ec-1")
    let registered = try await http.send("POST", "api/v1/register", bearer: good)
    #expect(registered.status == 200, "\(registered.text)")
    #expect(try await http.send("POST", "api/v1/register", as: "carol", key: "carol-secret-key").status == 200)

    var wrongAudience = TestIdentityProvider.claims(for: "alice", now: clock.now)
    wrongAudience.audiences = ["billing"]
    var expired = TestIdentityProvider.claims(for: "alice", now: clock.now)
    expired.expiresAt = Double(clock.now.sinceEpoch / .seconds(1)) - 120
    let cases: [(String, String)] = [
      (try await provider.token(expired, keyID: "ec-1"), "TOKEN_EXPIRED"),
      (try await provider.token(wrongAudience, keyID: "ec-1"), "TOKEN_WRONG_AUDIENCE"),
      (
        try await impostor.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "ec-9"),
        "TOKEN_UNKNOWN_KEY"
      ),
      (
        try await impostor.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "ec-1"),
        "TOKEN_BAD_SIGNATURE"
      ),
      ("not.a-token", "TOKEN_MALFORMED"),
    ]
    var sentTokens: [String] = [good]
    for (token, expected) in cases {
      sentTokens.append(token)
      let refused = try await http.send("POST", "api/v1/register", bearer: token)
      #expect(refused.status == 401, "\(expected): \(refused.text)")
      #expect(refused.code == "UNAUTHORIZED")
      #expect(reason(refused) == expected, "\(refused.text)")
      #expect(refused.headers["www-authenticate"]?.hasPrefix("Bearer") == true, "\(refused.headers)")
    }
    let wrongKey = try await http.send("POST", "api/v1/register", as: "carol", key: "not-carol-key-at-all")
    #expect(wrongKey.status == 401 && reason(wrongKey) == "CREDENTIALS_INVALID")
    #expect(wrongKey.headers["www-authenticate"]?.hasPrefix("Basic") == true, "\(wrongKey.headers)")

    await server.shutdown()
    try await started.running.value
    let lines = handler.kept.lines.withLock { $0 }
    let refusedLines = lines.filter { $0.message == "request refused" }
    #expect(Set(refusedLines.compactMap { $0.metadata["reason"] }).isSuperset(of: cases.map(\.1)), "\(refusedLines)")
    for line in lines {
      let text = line.message + line.metadata.values.joined()
      for token in sentTokens {
        // Any of the token's three parts would let a reader rebuild or replay it.
        for part in token.split(separator: ".") where part.count > 8 {
          #expect(!text.contains(part), "a log line holds a token: \(line.message)")
        }
      }
    }
  }

  @Test("while the identity provider cannot be reached, tokens are answered 503 (clients keep them), not 401")
  func keysUnavailable() async throws {
    let provider = TestIdentityProvider()
    try await provider.addP256(id: "ec-1")
    provider.setFailing(true)
    let clock = TestNow(Timestamp.wallClockNow())
    let tokens = JWTAuthenticator(
      keys: provider.source,
      policy: try TokenPolicy(issuer: TestIdentityProvider.issuer, audiences: [TestIdentityProvider.audience]),
      now: clock.closure
    )
    var configuration = EventHTTPServerConfiguration(authenticator: tokens)
    configuration.port = 0
    configuration.adminPort = 0
    configuration.snapshotInterval = nil
    let server = EventHTTPServer(
      application: KanbanServer(team: ["alice"]),
      configuration: configuration,
      logger: Logger(label: "tokens-test")
    )
    let started = try await RunningWithAdmin.start(server)
    let http = RawHTTP(base: URL(string: "http://127.0.0.1:\(started.port)")!)
    let token = try await provider.token(TestIdentityProvider.claims(for: "alice", now: clock.now), keyID: "ec-1")
    let down = try await http.send("POST", "api/v1/register", bearer: token)
    #expect(down.status == 503 && down.code == "SERVICE_UNAVAILABLE", "\(down.text)")
    provider.setFailing(false)
    clock.advance(by: .seconds(5))
    let up = try await http.send("POST", "api/v1/register", bearer: token)
    #expect(up.status == 200, "\(up.text)")
    await server.shutdown()
    try await started.running.value
  }
}
