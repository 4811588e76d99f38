/// The id of an event queue on the server.
///
/// Clients treat queue ids as opaque strings, as Zulip's clients do (Zulip has used both `"1514938867:1"`
/// and UUIDs). ``EventServer`` makes 128-bit random ids, written like a UUID, with ``random(using:)``.
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

  public var codingKey: any CodingKey { QueueIDKey(stringValue: rawValue) }

  public init?<Key: CodingKey>(codingKey: Key) {
    self.rawValue = codingKey.stringValue
  }

  private struct QueueIDKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }

  /// A new id carrying 128 random bits from `generator`, formatted `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
  public static func random(using generator: inout some RandomNumberGenerator) -> QueueID {
    let high = generator.next()
    let low = generator.next()
    let hex = hexDigits(high) + hexDigits(low)
    var text = ""
    text.reserveCapacity(36)
    for (offset, character) in hex.enumerated() {
      if offset == 8 || offset == 12 || offset == 16 || offset == 20 { text.append("-") }
      text.append(character)
    }
    return QueueID(rawValue: text)
  }

  private static func hexDigits(_ value: UInt64) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 16 - digits.count) + digits
  }

  public static func < (lhs: QueueID, rhs: QueueID) -> Bool {
    lhs.rawValue < rhs.rawValue
  }

  public var description: String { rawValue }
}
