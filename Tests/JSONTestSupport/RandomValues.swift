import EventProtocol
import Foundation

// Random values for the property tests of the package's JSON coder: its own (JSONCodingTests) and the
// vocabulary's, which writes event batches and envelopes through it (EventProtocolTests).

/// A random source for values and documents.
public struct Draw {
  public var random: SeededRandomNumberGenerator

  public init(seed: UInt64) { random = SeededRandomNumberGenerator(seed: seed) }

  public mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
  public mutating func chance(_ percent: Int) -> Bool { int(1...100) <= percent }

  /// A string mixing ASCII, the characters JSON escapes, and multi-byte scalars (2, 3 and 4 bytes).
  public mutating func string() -> String {
    let pieces = [
      "a", "Z", "_", "/", "\"", "\\", "\n", "\t", "\u{8}", "\u{c}", "\r", "\u{1}", "\u{1f}", "\u{7f}", " ",
      "é", "€", "😀", "\u{2028}", "0", "9", "{", "]", ":", ",",
    ]
    return (0..<int(0...12)).map { _ in
      chance(60) ? String(UnicodeScalar(UInt8(int(0x61...0x7a)))) : pieces[int(0...pieces.count - 1)]
    }
    .joined()
  }

  /// A key: short, often colliding in prefix, sometimes with characters that must be escaped.
  public mutating func key() -> String {
    chance(90)
      ? ["a", "b", "ab", "B", "_x", "q1", "q10", "q2", "id", "é", "z/y"][int(0...10)]
        + (chance(30) ? "\(int(0...20))" : "") : string()
  }

  /// A finite double from every range: whole, tiny, huge, negative zero, subnormal.
  public mutating func double() -> Double {
    switch int(0...6) {
    case 0: return Double(int(-1_000_000...1_000_000))
    case 1: return Double(int(-1000...1000)) / 7
    case 2: return -0.0
    case 3: return Double.leastNonzeroMagnitude * Double(int(1...1000))
    case 4: return Double.greatestFiniteMagnitude / Double(int(1...1000))
    case 5: return Double(bitPattern: random.next() & 0x7FEF_FFFF_FFFF_FFFF) * (chance(50) ? 1 : -1)
    default: return Double(int(-99...99)) * pow(10, Double(int(-30...30)))
    }
  }
}

/// A value exercising every shape a synthesized `Codable` produces.
public struct Sample: Codable, Equatable, Sendable {
  public enum Shape: Codable, Equatable, Sendable {
    case dot
    case circle(radius: Double)
    case labelled(String, Int)
  }

  public struct Inner: Codable, Equatable, Sendable {
    public var name: String
    public var tags: [String]
    public var weight: Float?
  }

  public var int: Int
  public var int8: Int8
  public var uint16: UInt16
  public var int64: Int64
  public var uint64: UInt64
  public var double: Double
  public var flag: Bool
  public var text: String
  public var optionalText: String?
  public var numbers: [Int]
  public var nested: [[Double]]
  public var inner: Inner
  public var inners: [Inner]
  public var byKey: [String: Int]
  public var byInt: [Int: String]
  /// Written by the coder's own path for `String`-keyed dictionaries of strings (a member in one copy when
  /// neither side needs an escape); keys and values here often do.
  public var labels: [String: String]
  public var shapes: [Shape]
  public var data: Data
  public var date: Date
  public var maybeInner: Inner?
  public var optionals: [Int?]

  public init(_ draw: inout Draw) {
    int = draw.chance(10) ? [Int.min, Int.max][draw.int(0...1)] : draw.int(-100_000...100_000)
    int8 = Int8(truncatingIfNeeded: draw.int(-128...127))
    uint16 = UInt16(draw.int(0...65535))
    int64 = Int64(bitPattern: draw.random.next())
    uint64 = draw.random.next()
    double = draw.double()
    flag = draw.chance(50)
    text = draw.string()
    optionalText = draw.chance(50) ? draw.string() : nil
    numbers = (0..<draw.int(0...5)).map { _ in draw.int(-1000...1000) }
    nested = (0..<draw.int(0...3)).map { _ in (0..<draw.int(0...3)).map { _ in draw.double() } }
    inner = Inner(draw: &draw)
    inners = (0..<draw.int(0...3)).map { _ in Inner(draw: &draw) }
    byKey = Dictionary(
      (0..<draw.int(0...6)).map { _ in (draw.key(), draw.int(-9...9)) },
      uniquingKeysWith: { first, _ in first }
    )
    byInt = Dictionary(
      (0..<draw.int(0...6)).map { _ in (draw.int(-50...50), draw.string()) },
      uniquingKeysWith: { first, _ in first }
    )
    labels = Dictionary(
      (0..<draw.int(0...6)).map { _ in (draw.key(), draw.chance(50) ? draw.key() : draw.string()) },
      uniquingKeysWith: { first, _ in first }
    )
    shapes = (0..<draw.int(0...4)).map { _ in
      switch draw.int(0...2) {
      case 0: .dot
      case 1: .circle(radius: draw.double())
      default: .labelled(draw.string(), draw.int(-5...5))
      }
    }
    data = Data((0..<draw.int(0...9)).map { _ in UInt8(draw.int(0...255)) })
    date = Date(timeIntervalSinceReferenceDate: Double(draw.int(-1_000_000...1_000_000)) / 4)
    maybeInner = draw.chance(50) ? Inner(draw: &draw) : nil
    optionals = (0..<draw.int(0...4)).map { _ in draw.chance(50) ? draw.int(-3...3) : nil }
  }
}

extension Sample.Inner {
  public init(draw: inout Draw) {
    name = draw.key()
    tags = (0..<draw.int(0...3)).map { _ in draw.string() }
    weight = draw.chance(50) ? Float(draw.int(-1000...1000)) / 8 : nil
  }
}

/// Foundation's bytes for `value`, keys sorted: the reference the package's coder must equal.
public func foundationSorted(_ value: some Encodable) throws -> [UInt8] {
  let encoder = JSONEncoder()
  encoder.outputFormatting = [.sortedKeys]
  return [UInt8](try encoder.encode(value))
}
