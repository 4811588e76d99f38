import EventProtocol
import Foundation

/// Each user's API key, and the check of a request's credentials against them.
///
/// Requests authenticate with HTTP basic authentication, `user:apiKey`, as Zulip's API does: a client keeps
/// one long-lived key per user (no token refresh to get wrong offline), and any HTTP client can send it.
/// Over anything but loopback it must travel inside TLS (put the server behind a TLS terminator).
public struct APIKeys: Sendable {
  private let keys: [UserID: [UInt8]]

  /// The shortest key accepted, in bytes.
  public static let minimumKeyBytes = 8

  /// Keys by user.
  /// - Throws: ``APIKeysError`` naming the first user (in order) whose key is shorter than
  ///   ``minimumKeyBytes`` or whose name is empty or holds a `:`.
  public init(_ keys: [UserID: String]) throws(APIKeysError) {
    for (user, key) in keys.sorted(by: { $0.key < $1.key }) {
      guard !user.rawValue.isEmpty, !user.rawValue.contains(":") else {
        throw APIKeysError("a user name must be non-empty and hold no ':' ('\(user.rawValue.prefix(40))')")
      }
      guard key.utf8.count >= Self.minimumKeyBytes else {
        throw APIKeysError("the key of \(user) is shorter than \(Self.minimumKeyBytes) characters")
      }
    }
    self.keys = keys.mapValues { Array($0.utf8) }
  }

  private init(checked keys: [UserID: [UInt8]]) {
    self.keys = keys
  }

  /// No keys: nobody is authenticated.
  public static let none = APIKeys(checked: [:])

  /// How many users have a key.
  public var count: Int { keys.count }

  /// Reads `user:key` pairs, one per line or separated by commas; blank lines and `#` comments are skipped.
  /// - Throws: ``APIKeysError`` naming the first bad entry.
  public static func parse(_ text: String) throws(APIKeysError) -> APIKeys {
    var keys: [UserID: String] = [:]
    let entries = text.split(whereSeparator: { $0 == "\n" || $0 == "," }).map {
      $0.trimmingCharacters(in: .whitespaces)
    }
    for (index, entry) in entries.enumerated() where !entry.isEmpty && !entry.hasPrefix("#") {
      let parts = entry.split(separator: ":", maxSplits: 1).map(String.init)
      guard parts.count == 2, !parts[0].isEmpty, parts[1].utf8.count >= minimumKeyBytes else {
        throw APIKeysError("entry \(index + 1) is not user:key with a key of at least \(minimumKeyBytes) characters")
      }
      keys[UserID(parts[0])] = parts[1]
    }
    guard !keys.isEmpty else { throw APIKeysError("no user:key entries") }
    return try APIKeys(keys)
  }

  /// The user an `Authorization` header proves, or `nil`.
  public func user(authorization: String?) -> UserID? {
    // Read without Foundation's string calls where it can: this runs for every request.
    guard let authorization, authorization.utf8.count > 6,
      authorization.utf8.prefix(6).map({ $0 | 0x20 }) == Array("basic ".utf8),
      let decoded = Data(base64Encoded: String(Self.trimmed(authorization.utf8.dropFirst(6)))),
      let text = String(validating: decoded, as: UTF8.self)
    else { return nil }
    let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
    guard parts.count == 2, let expected = keys[UserID(parts[0])] else { return nil }
    return Self.constantTimeEqual(Array(parts[1].utf8), expected) ? UserID(parts[0]) : nil
  }

  /// Compares without stopping at the first difference, so timing does not reveal a key's prefix.
  /// `text` without the spaces and tabs around it (HTTP's optional whitespace).
  private static func trimmed(_ text: Substring.UTF8View) -> Substring {
    let isSpace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
    let start = text.firstIndex { !isSpace($0) } ?? text.endIndex
    let end = text[start...].lastIndex { !isSpace($0) }.map { text.index(after: $0) } ?? start
    return Substring(text[start..<end])
  }

  private static func constantTimeEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    guard lhs.count == rhs.count else { return false }
    return zip(lhs, rhs).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
  }
}

/// Why API keys could not be read.
public struct APIKeysError: Error, Hashable, Sendable, CustomStringConvertible {
  /// What was wrong.
  public var description: String

  init(_ description: String) {
    self.description = description
  }
}
