import Foundation
import JSONCoding
import JSONTestSupport
import TestScheduling
import Testing

// Property tests of the package's own JSON coder against Foundation's, the reference: on random values, the
// same bytes out (sorted keys) and the same values back, whichever coder wrote the bytes; on random and
// mutated documents, the same verdict (valid or not) and the same values.

@Suite("WireJSON: the package's JSON coder against Foundation's")
struct WireJSONTests {
  @Test(
    "random values encode to Foundation's bytes and decode from either coder's bytes",
    .cpuBound,
    arguments: 0..<200
  )
  func randomValues(seed: UInt64) throws {
    var draw = Draw(seed: seed)
    let value = Sample(&draw)
    let reference = try foundationSorted(value)
    let ours = try WireJSON.encode(value)
    #expect(String(decoding: ours, as: UTF8.self) == String(decoding: reference, as: UTF8.self), "seed \(seed)")
    #expect(try WireJSON.decode(Sample.self, from: reference) == value)
    #expect(try JSONDecoder().decode(Sample.self, from: Data(ours)) == value)
    // Unsorted output (the order the fields were encoded in) decodes the same way with both coders.
    let unsorted = try WireJSON.encode(value, sortedKeys: false)
    #expect(try JSONDecoder().decode(Sample.self, from: Data(unsorted)) == value)
    #expect(try WireJSON.decode(Sample.self, from: unsorted) == value)
  }

  @Test("random documents and their mutations: the same verdict and the same values", .cpuBound, arguments: 0..<300)
  func randomDocuments(seed: UInt64) throws {
    var draw = Draw(seed: seed)
    var document = [UInt8](randomDocument(&draw, depth: 0).utf8)
    if draw.chance(60) {
      // One edit anywhere: a byte changed, dropped or repeated.
      let position = draw.int(0...max(0, document.count - 1))
      let bytes = Array("{}[]\",:0-.e+ \\tfnu1\u{1}".utf8) + [0xC3, 0xA9, 0xFF, 0xED]
      switch draw.int(0...2) {
      case 0 where !document.isEmpty: document[position] = bytes[draw.int(0...bytes.count - 1)]
      case 1 where !document.isEmpty: document.remove(at: position)
      default: document.insert(bytes[draw.int(0...bytes.count - 1)], at: position)
      }
    }
    let reference = Result { try JSONDecoder().decode(AnyJSON.self, from: Data(document)) }
    let ours = Result { try WireJSON.decode(AnyJSON.self, from: document) }
    let text = String(decoding: document, as: UTF8.self)
    switch (reference, ours) {
    case (.success(let expected), .success(let decoded)): #expect(decoded == expected, "seed \(seed): \(text)")
    case (.failure, .failure): break
    case (.success, .failure(let error)):
      // The one place we are stricter: a trailing comma, which Foundation lets through.
      let trailingComma = text.range(of: #",\s*[\]}]"#, options: .regularExpression) != nil
      #expect(trailingComma, "seed \(seed): Foundation accepts, we refuse (\(error)): \(text)")
    case (.failure(let error), .success):
      Issue.record("seed \(seed): Foundation refuses (\(error)), we accept: \(text)")
    }
  }

  private func randomDocument(_ draw: inout Draw, depth: Int) -> String {
    let encoder = JSONEncoder()
    func scalar(_ draw: inout Draw) -> String {
      switch draw.int(0...5) {
      case 0: return "null"
      case 1: return draw.chance(50) ? "true" : "false"
      case 2: return String(decoding: try! encoder.encode(draw.string()), as: UTF8.self)
      case 3: return String(draw.int(-1_000_000...1_000_000))
      case 4:
        return [
          "1.5", "-0.25e3", "1E2", "0", "-0", "12345678901234567890", "1e400", "\"\\ud83d\\ude00\"", "\"\\u00e9\"",
        ][draw.int(0...8)]
      default: return String(decoding: try! encoder.encode(draw.double()), as: UTF8.self)
      }
    }
    guard depth < 4, draw.chance(depth == 0 ? 90 : 40) else { return scalar(&draw) }
    let space = draw.chance(20) ? " \n" : ""
    if draw.chance(50) {
      let members = (0..<draw.int(0...4)).map { _ in
        String(decoding: try! encoder.encode(draw.key()), as: UTF8.self) + space + ":"
          + randomDocument(&draw, depth: depth + 1)
      }
      return "{" + space + members.joined(separator: "," + space) + "}"
    }
    return "[" + (0..<draw.int(0...4)).map { _ in randomDocument(&draw, depth: depth + 1) }.joined(separator: ",")
      + space + "]"
  }

  @Test(
    "the grammar's edges: the same verdict as Foundation's and the same values",
    arguments: [
      "[01]", "[-01]", "[00]", "[0]", "[-0]", "[1.]", "[.5]", "[-]", "[+1]", "[1e]", "[1e+]", "[1E-2]", "[tru]",
      "[nul]", "[true false]", "[\"a\u{1}\"]", "[\"\\x\"]", "[\"\\u12\"]", "[\"\\ud800\"]", "[\"\\udc00\"]",
      "[\"\\ud83d\\ude00\"]", "[\"\\u00E9\\/\"]", "[1] x", " [1] ", "[1", "{\"a\" 1}", "{\"a\":}", "{1:2}",
      "{\"a\":1 \"b\":2}", "\"text\"", "7", "", " ", "[\"\u{7f}\"]", "[-1.5e-3]", "[1e400]", "[-1e400]",
    ]
  )
  func grammar(text: String) {
    let reference = try? JSONDecoder().decode(AnyJSON.self, from: Data(text.utf8))
    #expect((try? WireJSON.decode(AnyJSON.self, from: Array(text.utf8))) == reference)
  }

  @Test("invalid UTF-8 in a string is refused, as Foundation refuses it")
  func invalidUTF8() throws {
    let cases: [[UInt8]] = [
      [0xFF], [0xC3], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82],
    ]
    for bytes in cases {
      let document = Array("[\"a".utf8) + bytes + Array("b\"]".utf8)
      #expect((try? JSONDecoder().decode([String].self, from: Data(document))) == nil, "\(bytes)")
      #expect((try? WireJSON.decode([String].self, from: document)) == nil, "\(bytes)")
    }
    #expect(try WireJSON.decode([String].self, from: Array("[\"é€😀\"]".utf8)) == ["é€😀"])
  }

  @Test("each byte a string's scan stops at, at each place of the eight-byte words it reads: Foundation's verdict")
  func specialBytesInEveryPlace() throws {
    // The parser reads a string eight bytes at a time and must stop at the first quote, backslash, control
    // character or byte of a multi-byte sequence wherever it sits in the word, and after earlier matches.
    let specials: [[UInt8]] = [
      Array("\"".utf8), Array("\\n".utf8), Array("\\u00e9".utf8), [0x1F], [0x00], [0x0A], [0x20], [0x7F],
      Array("é".utf8), Array("😀".utf8), [0xC3], [0xFF], [0x80], Array("\\".utf8) + [0x1F],
    ]
    for special in specials {
      for place in 0..<20 {
        for trailer in ["", "x", "\u{1}", "é"] {
          let string = Array(String(repeating: "a", count: place).utf8) + special + Array(trailer.utf8)
          let document = Array("[\"".utf8) + string + Array("bcdefghijklmnop\"]".utf8)
          let reference = try? JSONDecoder().decode([String].self, from: Data(document))
          let ours = try? WireJSON.decode([String].self, from: document)
          #expect(ours == reference, "\(special) at \(place), then \(trailer.utf8.map { $0 })")
        }
      }
    }
  }

  @Test("integers written with a fraction or an exponent decode when whole, as Foundation's do")
  func wholeNumbersInOtherForms() throws {
    for text in ["[1.0]", "[1e2]", "[-0]", "[0.1e1]", "[1.5]", "[300]", "[9223372036854775808]", "[-1]"] {
      let reference = try? JSONDecoder().decode([Int8].self, from: Data(text.utf8))
      #expect((try? WireJSON.decode([Int8].self, from: Array(text.utf8))) == reference, "\(text)")
      let wide = try? JSONDecoder().decode([Int].self, from: Data(text.utf8))
      #expect((try? WireJSON.decode([Int].self, from: Array(text.utf8))) == wide, "\(text)")
      let unsigned = try? JSONDecoder().decode([UInt64].self, from: Data(text.utf8))
      #expect((try? WireJSON.decode([UInt64].self, from: Array(text.utf8))) == unsigned, "\(text)")
    }
  }

  @Test("a repeated key decodes its first value, a missing key and a null are typed errors")
  func keys() throws {
    struct One: Codable, Equatable { var a: Int }
    #expect(try WireJSON.decode(One.self, from: Array(#"{"a":1,"a":2}"#.utf8)) == One(a: 1))
    #expect { try WireJSON.decode(One.self, from: Array("{}".utf8)) } throws: { error in
      if case DecodingError.keyNotFound(let key, _) = error { return key.stringValue == "a" }
      return false
    }
    #expect { try WireJSON.decode(One.self, from: Array(#"{"a":null}"#.utf8)) } throws: { error in
      if case DecodingError.valueNotFound = error { return true }
      return false
    }
    #expect { try WireJSON.decode(One.self, from: Array(#"{"a":"1"}"#.utf8)) } throws: { error in
      if case DecodingError.typeMismatch(_, let context) = error {
        return context.codingPath.map(\.stringValue) == ["a"]
      }
      return false
    }
  }

  @Test("a key encoded twice keeps its last value, as Foundation's sorted output does", .cpuBound, arguments: 0..<100)
  func repeatedKeysEncoded(seed: UInt64) throws {
    struct Key: CodingKey {
      var stringValue: String
      var intValue: Int? { nil }
      init(stringValue: String) { self.stringValue = stringValue }
      init?(intValue: Int) { nil }
    }
    /// Writes its pairs in order into one keyed container, repeating keys as the pairs do.
    struct Repeats: Encodable {
      var writes: [(key: String, value: Int)]
      func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for write in writes { try container.encode(write.value, forKey: Key(stringValue: write.key)) }
      }
    }
    var draw = Draw(seed: seed)
    let values = (0..<draw.int(1...3)).map { _ in
      Repeats(writes: (0..<draw.int(0...8)).map { _ in (draw.key(), draw.int(-9...9)) })
    }
    let ours = String(decoding: try WireJSON.encode(values), as: UTF8.self)
    #expect(ours == String(decoding: try foundationSorted(values), as: UTF8.self), "seed \(seed)")
  }

  @Test("a large object finds every key, the first of repeated ones")
  func largeObject() throws {
    let members = (0..<500).map { "\"k\($0)\":\($0)" } + ["\"k7\":-1"]
    let decoded = try WireJSON.decode(
      [String: Int].self,
      from: Array(("{" + members.joined(separator: ",") + "}").utf8)
    )
    #expect(decoded == Dictionary(uniqueKeysWithValues: (0..<500).map { ("k\($0)", $0) }))
  }

  @Test("nesting deeper than 512 is refused, not a crash")
  func deepNesting() {
    let deep = Array((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8)
    #expect(throws: DecodingError.self) { try WireJSON.decode(AnyJSON.self, from: deep) }
  }

  @Test("a subclass writing its superclass through superEncoder: Foundation's bytes, and back")
  func superEncoders() throws {
    let value = Child(name: "base/é", extra: [1, 2])
    let ours = try WireJSON.encode(value)
    #expect(String(decoding: ours, as: UTF8.self) == String(decoding: try foundationSorted(value), as: UTF8.self))
    let decoded = try WireJSON.decode(Child.self, from: ours)
    #expect(decoded.name == value.name && decoded.extra == value.extra)
    let fromFoundation = try JSONDecoder().decode(Child.self, from: Data(ours))
    #expect(fromFoundation.name == value.name && fromFoundation.extra == value.extra)
  }

  @Test("a non-finite number is an encoding error, as Foundation's")
  func nonFinite() {
    #expect(throws: EncodingError.self) { try WireJSON.encode([Double.nan]) }
    #expect(throws: EncodingError.self) { try WireJSON.encode(["x": Double.infinity]) }
  }

  @Test("an error inside a dictionary's value names the same coding path as Foundation's")
  func errorPathInsideDictionary() throws {
    /// A value whose encoding fails with its coding path, one level down.
    struct Failing: Encodable {
      private enum CodingKeys: CodingKey { case inner }
      func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Double.nan, forKey: .inner)
      }
    }
    func path(_ encode: () throws -> Void) -> [String]? {
      do {
        try encode()
        return nil
      } catch EncodingError.invalidValue(_, let context) {
        return context.codingPath.map(\.stringValue)
      } catch {
        return nil
      }
    }
    let value = ["outer": ["a key": Failing()]]
    let foundation = path { _ = try JSONEncoder().encode(value) }
    #expect(foundation == ["outer", "a key", "inner"])
    #expect(path { _ = try WireJSON.encode(value) } == foundation)
    // A number a dictionary holds (the generic path), and one in an array.
    let numbers = ["outer": ["a key": Double.nan]]
    #expect(path { _ = try JSONEncoder().encode(numbers) } == ["outer", "a key"])
    #expect(path { _ = try WireJSON.encode(numbers) } == ["outer", "a key"])
    let inArray = [[1.0, .infinity]]
    #expect(path { _ = try JSONEncoder().encode(inArray) } == ["Index 0", "Index 1"])
    #expect(path { _ = try WireJSON.encode(inArray) } == ["Index 0", "Index 1"])
  }
}

/// Any JSON value, decoded through the single-value, keyed and unkeyed containers, to compare parses.
private enum AnyJSON: Decodable, Equatable {
  case null
  case bool(Bool)
  case number(Double)
  case string(String)
  case array([AnyJSON])
  case object([String: AnyJSON])

  private struct Key: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }

  init(from decoder: any Decoder) throws {
    if let object = try? decoder.container(keyedBy: Key.self) {
      var members: [String: AnyJSON] = [:]
      for key in object.allKeys where members[key.stringValue] == nil {
        members[key.stringValue] = try object.decode(AnyJSON.self, forKey: key)
      }
      self = .object(members)
      return
    }
    if var array = try? decoder.unkeyedContainer() {
      var elements: [AnyJSON] = []
      while !array.isAtEnd { elements.append(try array.decode(AnyJSON.self)) }
      self = .array(elements)
      return
    }
    let single = try decoder.singleValueContainer()
    if single.decodeNil() {
      self = .null
    } else if let bool = try? single.decode(Bool.self) {
      self = .bool(bool)
    } else if let number = try? single.decode(Double.self) {
      self = .number(number)
    } else {
      self = .string(try single.decode(String.self))
    }
  }
}

/// A class whose subclass encodes it through `superEncoder()`, as class hierarchies do.
private class Base: Codable {
  var name: String
  init(name: String) { self.name = name }
}

private final class Child: Base {
  var extra: [Int]
  private enum CodingKeys: String, CodingKey { case extra }

  init(name: String, extra: [Int]) {
    self.extra = extra
    super.init(name: name)
  }

  required init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    extra = try container.decode([Int].self, forKey: .extra)
    try super.init(from: container.superDecoder())
  }

  override func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(extra, forKey: .extra)
    try super.encode(to: container.superEncoder())
  }
}
