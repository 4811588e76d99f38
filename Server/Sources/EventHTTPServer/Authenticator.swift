import EventProtocol

/// Who a request is from: the host's accounts, plugged into the server.
///
/// ``APIKeys`` (static keys, HTTP basic authentication) is the default; an app with its own accounts
/// implements this protocol (checking a session token against its database, say) and passes it to
/// ``EventHTTPServerConfiguration/init(authenticator:)``, without forking the server. Every route asks it
/// first: a request it does not vouch for is `401 UNAUTHORIZED`, and nothing is read or changed.
///
/// ```swift
/// struct SessionTokens: Authenticator {
///   let sessions: [String: UserID]
///   func user(authorization: String?) async -> UserID? {
///     guard let authorization, authorization.hasPrefix("Bearer ") else { return nil }
///     return sessions[String(authorization.dropFirst(7))]
///   }
/// }
/// ```
///
/// An authenticator that can say *why* it refuses (an expired token, a wrong audience) implements
/// ``verdict(authorization:)`` as well; the server answers its reason in the 401's `reason`.
public protocol Authenticator: Sendable {
  /// The user the request's `Authorization` header proves, or `nil` when it proves none.
  ///
  /// Must not reveal, through its answer or its timing, anything about other users' credentials, and must
  /// answer promptly: it runs before every request.
  func user(authorization: String?) async -> UserID?

  /// The user the request's `Authorization` header proves, why it proves none, or that the authenticator
  /// cannot tell right now. What every route asks.
  ///
  /// The default answers ``user(authorization:)``'s user, or ``AuthenticationRefusal/credentialsMissing``
  /// without a header and ``AuthenticationRefusal/credentialsInvalid`` with one.
  func verdict(authorization: String?) async -> AuthenticationVerdict
}

extension Authenticator {
  public func verdict(authorization: String?) async -> AuthenticationVerdict {
    if let user = await user(authorization: authorization) { return .user(user) }
    return .refused(authorization == nil ? .credentialsMissing : .credentialsInvalid)
  }
}

extension APIKeys: Authenticator {}
