import Foundation
import JSONCoding
import JSONTestSupport
import TestScheduling
import Testing

// The opt-in for types that write and read their own fields: on random values every method of the writer
// and the reader gives the bytes, values and errors of `Codable`'s path (JSONFieldsParity), and the
// checker finds a type whose fields say something else.

/// Every kind of member the writer and reader have, with its `Codable` conformance synthesized.
private struct EveryField: Codable, Equatable, JSONFieldsCodable {
  var name: String
  var count: Int
  var flag: Bool
  var ratio: Double
  var note: String?
  var limit: Int?
  var seen: Bool?
  var tags: [String]
  var inner: Inner?

  struct Inner: Codable, Equatable, JSONFieldsCodable {
    var label: String

    func encodeFields(to fields: inout JSONFieldsWriter) throws {
      try fields.encode(label, forKey: "label")
    }

    init(label: String) { self.label = label }

    init(fields: JSONFieldsReader) throws {
      label = try fields.decode(String.self, forKey: "label")
    }
  }

  private enum CodingKeys: String, CodingKey {
    case name
    case count
    case flag
    case ratio
    case note
    case limit = "max_count"
    case seen
    case tags
    case inner
  }

  init(_ draw: inout Draw) {
    name = draw.string()
    count = draw.chance(10) ? [Int.min, Int.max][draw.int(0...1)] : draw.int(-1000...1000)
    flag = draw.chance(50)
    ratio = draw.double()
    note = draw.chance(50) ? draw.string() : nil
    limit = draw.chance(50) ? draw.int(0...99) : nil
    seen = draw.chance(50) ? draw.chance(50) : nil
    tags = (0..<draw.int(0...3)).map { _ in draw.key() }
    inner = draw.chance(50) ? Inner(label: draw.string()) : nil
  }

  func encodeFields(to fields: inout JSONFieldsWriter) throws {
    try fields.encode(name, forKey: "name")
    try fields.encode(count, forKey: "count")
    try fields.encode(flag, forKey: "flag")
    try fields.encode(ratio, forKey: "ratio")
    try fields.encodeIfPresent(note, forKey: "note")
    try fields.encodeIfPresent(limit, forKey: "max_count")
    try fields.encodeIfPresent(seen, forKey: "seen")
    try fields.encode(tags, forKey: "tags")
    try fields.encodeIfPresent(inner, forKey: "inner")
  }

  init(fields: JSONFieldsReader) throws {
    name = try fields.decode(String.self, forKey: "name")
    count = try fields.decode(Int.self, forKey: "count")
    flag = try fields.decode(Bool.self, forKey: "flag")
    ratio = try fields.decode(Double.self, forKey: "ratio")
    note = try fields.decodeIfPresent(String.self, forKey: "note")
    limit = try fields.decodeIfPresent(Int.self, forKey: "max_count")
    seen = try fields.decodeIfPresent(Bool.self, forKey: "seen")
    tags = try fields.decode([String].self, forKey: "tags")
    inner = try fields.decodeIfPresent(Inner.self, forKey: "inner")
  }
}

/// Fields that disagree with the type's `Codable` in one way, chosen by `flaw`.
private struct Flawed: Codable, Equatable, JSONFieldsCodable {
  var name: String
  var count: Int?
  var flaw: Int

  func encodeFields(to fields: inout JSONFieldsWriter) throws {
    try fields.encode(flaw == 0 ? "other_name" : "name", forKey: flaw == 0 ? "other_name" : "name")
    if flaw == 1 {
      try fields.encode(count ?? 0, forKey: "count")
    } else {
      try fields.encodeIfPresent(count, forKey: "count")
    }
    try fields.encode(flaw, forKey: "flaw")
  }

  init(name: String, count: Int?, flaw: Int) {
    (self.name, self.count, self.flaw) = (name, count, flaw)
  }

  init(fields: JSONFieldsReader) throws {
    name = try fields.decodeIfPresent(String.self, forKey: "name") ?? "name"
    count = try fields.decodeIfPresent(Int.self, forKey: "count")
    flaw = try fields.decode(Int.self, forKey: "flaw")
  }
}

/// The example in `JSONFieldsCodable`'s documentation, as written there.
private struct Viewed: Codable, Equatable, JSONFieldsCodable {
  var videoID: String
  var seconds: Int?

  private enum CodingKeys: String, CodingKey {
    case videoID = "video_id"
    case seconds
  }

  func encodeFields(to fields: inout JSONFieldsWriter) throws {
    try fields.encode(videoID, forKey: "video_id")
    try fields.encodeIfPresent(seconds, forKey: "seconds")
  }

  init(fields: JSONFieldsReader) throws {
    videoID = try fields.decode(String.self, forKey: "video_id")
    seconds = try fields.decodeIfPresent(Int.self, forKey: "seconds")
  }

  init(videoID: String, seconds: Int?) {
    self.videoID = videoID
    self.seconds = seconds
  }
}

/// A value holding a flawed one through its own fields.
private struct Holder: Codable, Equatable, JSONFieldsCodable {
  var flawed: Flawed

  init(flawed: Flawed) { self.flawed = flawed }

  func encodeFields(to fields: inout JSONFieldsWriter) throws {
    try fields.encode(flawed, forKey: "flawed")
  }

  init(fields: JSONFieldsReader) throws {
    flawed = try fields.decode(Flawed.self, forKey: "flawed")
  }
}

@Suite("JSONFieldsCodable: a type's own fields against its Codable path")
struct JSONFieldsCodableTests {
  @Test("every writer and reader method: Codable's bytes, values and errors", .cpuBound, arguments: 0..<300)
  func parity(seed: UInt64) {
    var draw = Draw(seed: seed)
    let value = EveryField(&draw)
    #expect(JSONFieldsParity.differences(value) == [], "seed \(seed)")
  }

  @Test("the documentation's example agrees with its Codable path")
  func documentationExample() {
    for value in [Viewed(videoID: "v1", seconds: 12), Viewed(videoID: "v/2", seconds: nil)] {
      #expect(JSONFieldsParity.differences(value) == [])
    }
  }

  @Test("the fields are what the package's coder uses, inside other values too")
  func fieldsAreUsed() throws {
    var draw = Draw(seed: 1)
    let values = (0..<5).map { _ in EveryField(&draw) }
    let bytes = try WireJSON.encode(values)
    #expect(try WireJSON.decode([EveryField].self, from: bytes) == values)
    // A flawed type shows which path ran: its fields write a key its `Codable` never writes. They run for a
    // document's top-level value and for the members of a value that writes its own fields; a value nested
    // in an ordinary `Codable` one goes through `Codable` (the conformance check is not made per value).
    let flawed = Flawed(name: "n", count: nil, flaw: 0)
    #expect(String(decoding: try WireJSON.encode(flawed), as: UTF8.self).contains("other_name"))
    #expect(String(decoding: try WireJSON.encode(Holder(flawed: flawed)), as: UTF8.self).contains("other_name"))
    #expect(!String(decoding: try WireJSON.encode([flawed]), as: UTF8.self).contains("other_name"))
  }

  @Test("the checker finds fields that write another key, a member Codable leaves out, or read a missing member")
  func checkerFindsFlaws() {
    #expect(JSONFieldsParity.differences(Flawed(name: "n", count: 3, flaw: 0)).isEmpty == false)
    #expect(JSONFieldsParity.differences(Flawed(name: "n", count: nil, flaw: 1)).isEmpty == false)
    // Reading a missing `name` as "name" where Codable throws keyNotFound.
    #expect(
      JSONFieldsParity.differences(Flawed(name: "name", count: 1, flaw: 2)).contains { $0.hasPrefix("without name") }
    )
  }
}
