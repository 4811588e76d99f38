/// The id of an event queue on the server.
///
/// Clients treat queue ids as opaque strings, as Zulip's clients do (Zulip has used both `"1514938867:1"`
/// and UUIDs). `EventServer` makes random 15-character ids with ``random(using:)``.
public struct QueueID: RawRepresentable, Hashable, Comparable, Codable, CodingKeyRepresentable, Sendable,
  ExpressibleByStringLiteral, CustomStringConvertible
{
  public let rawValue: String

  public init(rawValue: String) {
    self.rawValue = rawValue
  }

  public init(stringLiteral value: String) {
    self.rawValue = value
  }

  /// The queue id as a dictionary key in JSON.
  public var codingKey: any CodingKey { QueueIDKey(stringValue: rawValue) }

  /// The queue id a JSON dictionary key holds.
  public init?<Key: CodingKey>(codingKey: Key) {
    self.rawValue = codingKey.stringValue
  }

  private struct QueueIDKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }

  /// A new id of 15 characters from `[0-9A-Za-z]`, carrying 89 random bits from `generator`.
  ///
  /// Fifteen ASCII characters is the longest string Swift stores inline, so an id costs no allocation of its
  /// own: the server keeps one per queue, and looks one up per request.
  public static func random(using generator: inout some RandomNumberGenerator) -> QueueID {
    QueueID(
      rawValue: String(unsafeUninitializedCapacity: 15) { characters in
        for index in 0..<15 {
          characters[index] = alphabet[Int.random(in: 0..<alphabet.count, using: &generator)]
        }
        return 15
      }
    )
  }

  /// The characters of a random id.
  private static let alphabet: [UInt8] = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)

  public static func < (lhs: QueueID, rhs: QueueID) -> Bool {
    lhs.rawValue < rhs.rawValue
  }

  public var description: String { rawValue }
}
