import Foundation
import JSONTestSupport
import Testing

@testable import JSONCoding

/// Collects the elements of the member `a` as integers, with the coding path each was decoded at.
private final class IntegerStreamer: JSONArrayStreamer {
  var member: any CodingKey { JSONIndexKey(stringValue: "a") }
  var seen: [(path: String, value: Int)] = []

  func decodeElement(_ decoder: JSONTapeDecoder) -> Bool {
    guard let value = try? Int(from: decoder) else { return false }
    seen.append(
      (decoder.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: "."), value)
    )
    return true
  }
}

@Suite("Arrays decoded as they are parsed (JSONArrayStreamer)")
struct StreamedArrayTests {
  @Test("each element once, in order, at its own coding path; the rest of the document as before")
  func elementsInOrder() throws {
    let streamer = IntegerStreamer()
    let bytes = Array(#"{"a":[1, 2 ,3],"b":[4],"c":{"a":[5]}}"#.utf8)
    struct Rest: Decodable, Equatable {
      var b: [Int]
      var c: [String: [Int]]
    }
    let rest = try WireJSON.decode(Rest.self, from: bytes, streaming: streamer)
    #expect(rest == Rest(b: [4], c: ["a": [5]]))
    #expect(streamer.seen.map(\.path) == ["a.0", "a.1", "a.2"])
    #expect(streamer.seen.map(\.value) == [1, 2, 3])
  }

  @Test("a streamed array read any other way is an error, never an empty array")
  func readAgain() throws {
    let bytes = Array(#"{"a":[1,2]}"#.utf8)
    #expect(throws: DecodingError.self) {
      try WireJSON.decode([String: [Int]].self, from: bytes, streaming: IntegerStreamer())
    }
    #expect(try WireJSON.decode([String: [Int]].self, from: bytes) == ["a": [1, 2]])
  }

  @Test("a syntax error after the array is the document's error, whatever the elements decoded to")
  func syntaxAfterTheArray() throws {
    let streamer = IntegerStreamer()
    let bytes = Array(#"{"a":[1,"x",3],"b":}"#.utf8)
    let reference = try? JSONDecoder().decode([String: [Int]].self, from: Data(bytes))
    #expect(reference == nil)
    #expect(throws: DecodingError.self) { try WireJSON.decode([String: Int].self, from: bytes, streaming: streamer) }
    // The first element decoded; the second failed and stopped the decoding; the third was only parsed.
    #expect(streamer.seen.map(\.value) == [1])
  }
}
