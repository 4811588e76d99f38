/// The identity of a user, as the server's authentication established it.
///
/// Queues belong to the user who registered them; a request for another user's queue is answered
/// exactly as for a queue that does not exist.
public struct UserID: RawRepresentable, Hashable, Comparable, Codable, Sendable, ExpressibleByStringLiteral,
  CustomStringConvertible
{
  public let rawValue: String

  public init(rawValue: String) {
    self.rawValue = rawValue
  }

  /// The user id `rawValue`.
  public init(_ rawValue: String) {
    self.rawValue = rawValue
  }

  public init(stringLiteral value: String) {
    self.rawValue = value
  }

  public static func < (lhs: UserID, rhs: UserID) -> Bool {
    lhs.rawValue < rhs.rawValue
  }

  public var description: String { rawValue }
}
