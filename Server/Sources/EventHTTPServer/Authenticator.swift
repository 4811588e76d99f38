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
public protocol Authenticator: Sendable {
  /// The user the request's `Authorization` header proves, or `nil` when it proves none.
  ///
  /// Must not reveal, through its answer or its timing, anything about other users' credentials, and must
  /// answer promptly: it runs before every request.
  func user(authorization: String?) async -> UserID?
}

extension APIKeys: Authenticator {}
