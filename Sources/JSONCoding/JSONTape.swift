import Foundation

/// A JSON document parsed once into a flat list of its values, which decoding then reads without parsing
/// again: the bytes are kept and each string or number is read from them only when a field asks for it.
///
/// Values are in document order. A container's entry is followed by its children (an object's as key,
/// value, key, value…) and records the index just past them, so a decoder skips a field it does not want in
/// one step. The grammar is RFC 8259's, strictly: no trailing commas, no leading zeros, no control
/// characters or invalid UTF-8 in strings, no lone surrogates, nothing after the value but white space,
/// and at most ``maximumDepth`` nested containers.
package final class JSONTape {
  /// What a value is.
  package enum Kind: UInt8 {
    case null, `false`, `true`, number, string, array, object
  }

  /// One value: its kind, its bytes (a string's between the quotes), and where the next sibling starts.
  ///
  /// Sixteen bytes: the kind and the flag share a word with the count (its low four bits), which leaves a
  /// container ``maximumCount`` elements or members. A tape is most of a decode's memory (W3's answer of
  /// 7 MB made 18 MB of entries at twenty bytes each), and memory touched for the first time costs a page
  /// fault per 4 KiB.
  package struct Entry {
    package var start: UInt32
    package var end: UInt32
    /// The index just past this value and its children.
    package var next: UInt32
    /// The count above the low four bits: the flag (bit 3) and the kind (bits 0–2).
    private var countKindAndFlag: UInt32

    @inline(__always)
    init(kind: Kind, flag: Bool, start: UInt32, end: UInt32, next: UInt32, count: UInt32) {
      self.start = start
      self.end = end
      self.next = next
      countKindAndFlag = count << 4 | (flag ? 8 : 0) | UInt32(kind.rawValue)
    }

    @inline(__always) package var kind: Kind { Kind(rawValue: UInt8(truncatingIfNeeded: countKindAndFlag & 7))! }

    /// For a string: it contains escapes. For a number: it has a fraction or an exponent.
    @inline(__always) package var flag: Bool { countKindAndFlag & 8 != 0 }

    /// An array's elements or an object's members.
    @inline(__always) package var count: UInt32 {
      get { countKindAndFlag >> 4 }
      set { countKindAndFlag = newValue << 4 | countKindAndFlag & 15 }
    }

    /// Whether this is an array whose elements were decoded as they were parsed, and are not on the tape
    /// (an array's flag).
    @inline(__always) package var isStreamed: Bool { countKindAndFlag & 15 == 8 | UInt32(Kind.array.rawValue) }
  }

  /// The most elements or members one container may have (2²⁸ − 1; a document under 512 MiB cannot reach it).
  static let maximumCount: UInt32 = (1 << 28) - 1

  /// The deepest nesting accepted, as `JSONDecoder`'s.
  static let maximumDepth = 512

  package let bytes: [UInt8]
  // `@exclusivity(unchecked)`, for the reason given on `JSONOutput`'s properties: a tape is not `Sendable`,
  // is read by one decode on one thread, and no access to these properties spans a call to a value's
  // `init(from:)` (the path is pushed before and popped after it, each a separate access). `entries` only
  // changes on a streamed array's tape, between two of its elements' decodes (`JSONTape+Streaming.swift`).
  @usableFromInline @exclusivity(unchecked) var entries: [Entry]
  /// The keys leading to the value being decoded (a stack; see `JSONTapeDecoder`).
  @exclusivity(unchecked) package var path: [any CodingKey] = []
  /// What decoders' `userInfo` holds.
  @exclusivity(unchecked) var userInfo: [CodingUserInfoKey: Any] = [:]
  /// Member lookup tables of large objects, built on first use.
  @exclusivity(unchecked) var memberTables: [UInt32: [String: UInt32]] = [:]
  /// Whether ``JSONFieldsCodable`` values read their own fields (false only to compare with their `Codable`
  /// path: ``JSONFieldsParity``).
  var readsFields = true

  /// What decodes the streamed array, if the document had it (``JSONArrayStreamer``).
  package let streamer: (any JSONArrayStreamer)?

  /// An empty tape over `bytes`, onto which a streamed array's elements are parsed one at a time
  /// (`JSONTape+Streaming.swift`).
  init(elementsOf bytes: [UInt8]) {
    self.bytes = bytes
    self.streamer = nil
    self.entries = []
  }

  /// Parses `bytes`.
  /// - Parameter streamer: What decodes the elements of one array member of the root object as they are
  ///   parsed, so that the tape does not hold them (``JSONArrayStreamer``); `nil` for none.
  /// - Throws: `DecodingError.dataCorrupted` naming the offset of the first byte that is not valid JSON.
  init(_ bytes: [UInt8], streaming streamer: (any JSONArrayStreamer)? = nil) throws {
    self.bytes = bytes
    self.streamer = streamer
    var entries: [Entry] = []
    // A streamed array's elements are not on the tape, so a guess from the size would hold them all.
    entries.reserveCapacity(streamer == nil ? bytes.count / 8 + 4 : 16)
    let parsed: Result<Void, JSONTapeError> = bytes.withUnsafeBufferPointer { buffer in
      do throws(JSONTapeError) {
        // A byte order mark is skipped, as RFC 8259 allows a parser to and `JSONDecoder` does.
        let start = buffer.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        var parser = Parser(bytes: buffer, position: start)
        if let streamer { parser.stream = StreamedMember(streamer: streamer, elements: JSONTape(elementsOf: bytes)) }
        try parser.skipWhitespace()
        try parser.parseValue(into: &entries, depth: 0)
        try parser.skipWhitespace(allowingEnd: true)
        guard parser.position == buffer.count else {
          throw JSONTapeError(offset: parser.position, "unexpected text after the value")
        }
        return .success(())
      } catch {
        return .failure(error)
      }
    }
    self.entries = entries
    if case .failure(let error) = parsed {
      throw DecodingError.dataCorrupted(
        .init(
          codingPath: [],
          debugDescription: "The given data was not valid JSON: \(error.reason) at byte \(error.offset)."
        )
      )
    }
  }

  @inlinable package subscript(index: UInt32) -> Entry { entries[Int(index)] }

  // MARK: Reading scalars

  /// The string at `index` (which must be a string entry).
  package func string(at index: UInt32) -> String {
    let entry = entries[Int(index)]
    guard entry.flag else {
      // Through a buffer pointer: a slice of the array would retain and release its storage per string.
      return bytes.withUnsafeBufferPointer {
        String(decoding: UnsafeBufferPointer(rebasing: $0[Int(entry.start)..<Int(entry.end)]), as: UTF8.self)
      }
    }
    return String(decoding: (try? Self.unescape(bytes[Int(entry.start)..<Int(entry.end)])) ?? [], as: UTF8.self)
  }

  /// Whether the string at `index` equals `text`.
  package func string(at index: UInt32, equals text: String) -> Bool {
    let entry = entries[Int(index)]
    guard !entry.flag else { return string(at: index) == text }
    let length = Int(entry.end - entry.start)
    guard text.utf8.count == length else { return false }
    var text = text
    return text.withUTF8 { utf8 in
      bytes.withUnsafeBufferPointer { buffer in
        length == 0 || memcmp(utf8.baseAddress!, buffer.baseAddress! + Int(entry.start), length) == 0
      }
    }
  }

  /// The text of the number at `index`.
  func numberText(at index: UInt32) -> String {
    let entry = entries[Int(index)]
    return String(decoding: bytes[Int(entry.start)..<Int(entry.end)], as: UTF8.self)
  }

  /// The number at `index` as an integer of 64 bits, when it is written as one and fits.
  func integer(at index: UInt32) -> Int64? {
    let entry = entries[Int(index)]
    guard !entry.flag else { return nil }
    var position = Int(entry.start)
    let negative = bytes[position] == UInt8(ascii: "-")
    if negative { position += 1 }
    var magnitude: UInt64 = 0
    while position < Int(entry.end) {
      let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
      let (sum, overflow2) = times10.addingReportingOverflow(UInt64(bytes[position] &- UInt8(ascii: "0")))
      if overflow1 || overflow2 { return nil }
      magnitude = sum
      position += 1
    }
    if negative {
      return magnitude <= UInt64(Int64.max) + 1 ? Int64(truncatingIfNeeded: 0 &- magnitude) : nil
    }
    return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
  }

  /// The number at `index` as an unsigned integer of 64 bits, when it is written as one and fits.
  func unsignedInteger(at index: UInt32) -> UInt64? {
    let entry = entries[Int(index)]
    guard !entry.flag else { return nil }
    let negative = bytes[Int(entry.start)] == UInt8(ascii: "-")
    var magnitude: UInt64 = 0
    for position in (Int(entry.start) + (negative ? 1 : 0))..<Int(entry.end) {
      let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
      let (sum, overflow2) = times10.addingReportingOverflow(UInt64(bytes[position] &- UInt8(ascii: "0")))
      if overflow1 || overflow2 { return nil }
      magnitude = sum
    }
    return negative && magnitude != 0 ? nil : magnitude
  }

  /// Decodes a string's escapes (the bytes between its quotes).
  static func unescape(_ raw: ArraySlice<UInt8>) throws(JSONTapeError) -> [UInt8] {
    var result: [UInt8] = []
    result.reserveCapacity(raw.count)
    var index = raw.startIndex
    func hex(_ at: Int) throws(JSONTapeError) -> UInt32 {
      guard at + 4 <= raw.endIndex else { throw JSONTapeError(offset: at, "a \\u escape needs four hex digits") }
      var value: UInt32 = 0
      for byte in raw[at..<(at + 4)] {
        let digit: UInt8
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
        default: throw JSONTapeError(offset: at, "a \\u escape needs four hex digits")
        }
        value = value << 4 | UInt32(digit)
      }
      return value
    }
    while index < raw.endIndex {
      let byte = raw[index]
      guard byte == UInt8(ascii: "\\") else {
        result.append(byte)
        index += 1
        continue
      }
      guard index + 1 < raw.endIndex else { throw JSONTapeError(offset: index, "an escape ends the string") }
      let escaped = raw[index + 1]
      index += 2
      switch escaped {
      case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): result.append(escaped)
      case UInt8(ascii: "b"): result.append(0x08)
      case UInt8(ascii: "f"): result.append(0x0C)
      case UInt8(ascii: "n"): result.append(0x0A)
      case UInt8(ascii: "r"): result.append(0x0D)
      case UInt8(ascii: "t"): result.append(0x09)
      case UInt8(ascii: "u"):
        var scalar = try hex(index)
        index += 4
        if (0xD800..<0xDC00).contains(scalar) {
          guard index + 6 <= raw.endIndex, raw[index] == UInt8(ascii: "\\"), raw[index + 1] == UInt8(ascii: "u") else {
            throw JSONTapeError(offset: index, "a high surrogate without its low surrogate")
          }
          let low = try hex(index + 2)
          guard (0xDC00..<0xE000).contains(low) else {
            throw JSONTapeError(offset: index, "a high surrogate without its low surrogate")
          }
          scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
          index += 6
        } else if (0xDC00..<0xE000).contains(scalar) {
          throw JSONTapeError(offset: index, "a low surrogate without its high surrogate")
        }
        result.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
      default: throw JSONTapeError(offset: index - 1, "an unknown escape")
      }
    }
    return result
  }
}
