import EventProtocol

/// Two authenticators behind one server, chosen by the `Authorization` header's scheme: `Basic` for one
/// (API keys, a backend's service key), `Bearer` for the other (the identity provider's tokens).
///
/// ```swift
/// let authenticator = AuthenticationSchemes(basic: apiKeys, bearer: jwtAuthenticator)
/// ```
///
/// A header of a scheme with no authenticator here, or no header, is refused as
/// ``AuthenticationRefusal/credentialsMissing``.
public struct AuthenticationSchemes: Authenticator {
  /// Who checks `Basic` credentials, if anyone.
  public let basic: (any Authenticator)?
  /// Who checks `Bearer` tokens, if anyone.
  public let bearer: (any Authenticator)?

  /// Authenticators by scheme; either may be `nil`.
  public init(basic: (any Authenticator)?, bearer: (any Authenticator)?) {
    self.basic = basic
    self.bearer = bearer
  }

  public func user(authorization: String?) async -> UserID? {
    await verdict(authorization: authorization).user
  }

  public func verdict(authorization: String?) async -> AuthenticationVerdict {
    guard let authorization, let chosen = authenticator(for: authorization) else {
      return .refused(.credentialsMissing)
    }
    return await chosen.verdict(authorization: authorization)
  }

  /// The authenticator for the scheme `authorization` names (case-insensitive, RFC 9110 §11.1).
  private func authenticator(for authorization: String) -> (any Authenticator)? {
    let scheme = authorization.utf8.prefix { $0 != UInt8(ascii: " ") }.map { $0 | 0x20 }
    if scheme == Array("basic".utf8) { return basic }
    if scheme == Array("bearer".utf8) { return bearer }
    return nil
  }
}
