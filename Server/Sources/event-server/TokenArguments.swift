import ArgumentParser
import EventHTTPServer
import Foundation
import Logging
import TokenAuthentication

/// The bearer-token options: where the identity provider's keys are, and what its tokens must say. Without
/// them, only API keys are taken.
struct TokenArguments: ParsableArguments {
  @Option(name: .customLong("jwt-jwks-url"), help: "The identity provider's JWKS URL (fetched and refreshed).")
  var jwksURL: String?
  @Option(
    name: .customLong("jwt-jwks-file"),
    help: "A JWKS file (read again on refresh, so a rotation needs no restart)."
  )
  var jwksFile: String?
  @Option(name: .customLong("jwt-issuer"), help: "The iss every token must carry.")
  var issuer: String?
  @Option(name: .customLong("jwt-audience"), help: "The audiences this server is, comma-separated (aud must hold one).")
  var audience: String?
  @Option(name: .customLong("jwt-user-claim"), help: "The claim naming the user.")
  var userClaim = "sub"
  @Option(
    name: .customLong("jwt-tenant-claim"),
    help: "The claim naming the user's tenant: users become tenant/user (the checklist's teams)."
  )
  var tenantClaim: String?
  @Option(name: .customLong("jwt-algorithms"), help: "Accepted algorithms, comma-separated.")
  var algorithms = "RS256,ES256"
  @Option(name: .customLong("jwt-leeway"), help: "Seconds of clock skew allowed around exp and nbf.")
  var leeway = 30.0

  /// Whether bearer tokens are configured at all.
  var isConfigured: Bool { jwksURL != nil || jwksFile != nil || issuer != nil || audience != nil }

  func validate() throws {
    guard isConfigured else { return }
    guard (jwksURL == nil) != (jwksFile == nil) else {
      throw ValidationError("bearer tokens need exactly one of --jwt-jwks-url and --jwt-jwks-file")
    }
    if let jwksURL {
      guard let url = URL(string: jwksURL), url.scheme == "https" || url.scheme == "http", url.host != nil else {
        throw ValidationError("--jwt-jwks-url must be an http:// or https:// URL, not '\(jwksURL)'")
      }
    }
    guard issuer != nil else { throw ValidationError("bearer tokens need --jwt-issuer") }
    guard audience != nil else { throw ValidationError("bearer tokens need --jwt-audience") }
    _ = try policy()
  }

  /// The policy the options describe.
  /// - Throws: `ValidationError` with ``TokenPolicyError``'s line.
  func policy() throws -> TokenPolicy {
    func list(_ text: String) -> Set<String> {
      Set(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
    }
    guard leeway.isFinite, leeway >= 0 else { throw ValidationError("--jwt-leeway must be 0 to 300 seconds") }
    do {
      return try TokenPolicy(
        issuer: issuer ?? "",
        audiences: list(audience ?? ""),
        userClaim: userClaim,
        tenantClaim: tenantClaim,
        algorithms: list(algorithms),
        leeway: .milliseconds(Int64(min(leeway, 1e6) * 1000))
      )
    } catch {
      throw ValidationError("bearer tokens: \(error)")
    }
  }

  /// The authenticator of bearer tokens, or `nil` when none is configured.
  func authenticator(logger: Logger) throws -> JWTAuthenticator? {
    guard isConfigured else { return nil }
    let keys: KeySetSource
    if let jwksURL, let url = URL(string: jwksURL) {
      keys = .url(url)
    } else if let jwksFile {
      keys = .file(jwksFile)
    } else {
      return nil
    }
    return JWTAuthenticator(keys: keys, policy: try policy(), logger: logger)
  }
}
