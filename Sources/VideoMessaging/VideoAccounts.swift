import EventProtocol

/// The users of the video service and their API tokens: a request's token says who makes it.
public struct VideoAccounts: Sendable, Equatable {
  private var users: [String: UserID] = [:]

  /// No accounts.
  public init() {}

  /// Adds (or replaces) `user`'s token.
  public mutating func add(_ user: UserID, token: String) {
    users = users.filter { $0.value != user }
    users[token] = user
  }

  /// The user a token belongs to.
  /// - Throws: `UNAUTHORIZED` for an unknown token.
  public func authenticate(_ token: String) throws(EventAPIError) -> UserID {
    guard let user = users[token] else { throw .unauthorized() }
    return user
  }
}
