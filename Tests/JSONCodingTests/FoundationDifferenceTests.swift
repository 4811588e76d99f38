import Foundation
import JSONCoding
import Testing

// Where the package's coder and Foundation's differ on input, one document each (docs/json-coder.md,
// "What it accepts"). The random document tests hold the rest: the same verdict and the same values.

@Suite("WireJSON and Foundation: the documents where their verdicts differ")
struct FoundationDifferenceTests {
  @Test(
    "a trailing comma: Foundation's decoder accepts it, this coder refuses it with the offset",
    arguments: ["[1,]", "[1,2,]", "{\"a\":1,}", "{\"a\":[1,],\"b\":2}"]
  )
  func trailingComma(text: String) throws {
    #expect((try? JSONDecoder().decode(AnyValue.self, from: Data(text.utf8))) != nil)
    #expect {
      try WireJSON.decode(AnyValue.self, from: Array(text.utf8))
    } throws: { error in
      guard case DecodingError.dataCorrupted(let context) = error else { return false }
      return context.debugDescription.contains("at byte")
    }
  }

  @Test("a byte order mark before the value: both skip it; anywhere else both refuse it")
  func byteOrderMark() throws {
    let text = "\u{FEFF}[1]"
    #expect(try JSONDecoder().decode([Int].self, from: Data(text.utf8)) == [1])
    #expect(try WireJSON.decode([Int].self, from: Array(text.utf8)) == [1])
    for misplaced in [" \u{FEFF}[1]", "[\u{FEFF}1]", "[1]\u{FEFF}"] {
      #expect((try? JSONDecoder().decode([Int].self, from: Data(misplaced.utf8))) == nil)
      #expect((try? WireJSON.decode([Int].self, from: Array(misplaced.utf8))) == nil)
    }
  }

  @Test("a repeated key: both decode its first value", arguments: ["{\"a\":1,\"a\":2}"])
  func repeatedKey(text: String) throws {
    #expect(try JSONDecoder().decode(OneMember.self, from: Data(text.utf8)).a == 1)
    #expect(try WireJSON.decode(OneMember.self, from: Array(text.utf8)).a == 1)
  }
}

private struct OneMember: Decodable {
  var a: Int
}

/// Any JSON value, decoded only to learn whether the document is accepted.
private enum AnyValue: Decodable {
  case value

  init(from decoder: any Decoder) throws {
    if var array = try? decoder.unkeyedContainer() {
      while !array.isAtEnd { _ = try array.decode(AnyValue.self) }
    } else if let object = try? decoder.container(keyedBy: AnyKey.self) {
      for key in object.allKeys { _ = try object.decode(AnyValue.self, forKey: key) }
    } else {
      let single = try decoder.singleValueContainer()
      if !single.decodeNil() {
        if (try? single.decode(Bool.self)) == nil, (try? single.decode(Double.self)) == nil {
          _ = try single.decode(String.self)
        }
      }
    }
    self = .value
  }
}

private struct AnyKey: CodingKey {
  var stringValue: String
  var intValue: Int? { nil }
  init(stringValue: String) { self.stringValue = stringValue }
  init?(intValue: Int) { nil }
}
