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
  package struct Entry {
    package var kind: Kind
    /// For a string: it contains escapes. For a number: it has a fraction or an exponent.
    package var flag: Bool
    package var start: UInt32
    package var end: UInt32
    /// The index just past this value and its children.
    package var next: UInt32
    /// An array's elements or an object's members.
    package var count: UInt32
  }

  /// The deepest nesting accepted, as `JSONDecoder`'s.
  static let maximumDepth = 512

  package let bytes: [UInt8]
  @usableFromInline let entries: [Entry]
  // `@exclusivity(unchecked)`, for the reason given on `JSONOutput`'s properties: a tape is not `Sendable`,
  // is read by one decode on one thread, and no access to these properties spans a call to a value's
  // `init(from:)` (the path is pushed before and popped after it, each a separate access).
  /// The keys leading to the value being decoded (a stack; see `JSONTapeDecoder`).
  @exclusivity(unchecked) package var path: [any CodingKey] = []
  /// What decoders' `userInfo` holds.
  @exclusivity(unchecked) var userInfo: [CodingUserInfoKey: Any] = [:]
  /// Member lookup tables of large objects, built on first use.
  @exclusivity(unchecked) var memberTables: [UInt32: [String: UInt32]] = [:]
  /// Whether ``JSONFieldsCodable`` values read their own fields (false only to compare with their `Codable`
  /// path: ``JSONFieldsParity``).
  var readsFields = true

  /// Parses `bytes`.
  /// - Throws: `DecodingError.dataCorrupted` naming the offset of the first byte that is not valid JSON.
  init(_ bytes: [UInt8]) throws {
    self.bytes = bytes
    var entries: [Entry] = []
    entries.reserveCapacity(bytes.count / 8 + 4)
    let parsed: Result<Void, JSONTapeError> = bytes.withUnsafeBufferPointer { buffer in
      do throws(JSONTapeError) {
        // A byte order mark is skipped, as RFC 8259 allows a parser to and `JSONDecoder` does.
        let start = buffer.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        var parser = Parser(bytes: buffer, position: start)
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

/// Where and why a document is not valid JSON.
struct JSONTapeError: Error {
  var offset: Int
  var reason: String

  init(offset: Int, _ reason: String) {
    self.offset = offset
    self.reason = reason
  }
}

extension JSONTape {
  /// A recursive-descent parser over the bytes, appending entries.
  fileprivate struct Parser {
    let bytes: UnsafeBufferPointer<UInt8>
    var position: Int

    @inline(__always)
    mutating func skipWhitespace(allowingEnd: Bool = false) throws(JSONTapeError) {
      // Most values follow their separator directly: one comparison decides.
      if position < bytes.count && bytes[position] > 0x20 { return }
      try skipWhitespaceRun(allowingEnd: allowingEnd)
    }

    mutating func skipWhitespaceRun(allowingEnd: Bool) throws(JSONTapeError) {
      while position < bytes.count {
        switch bytes[position] {
        case 0x20, 0x0A, 0x0D, 0x09: position += 1
        default: return
        }
      }
      if !allowingEnd { throw JSONTapeError(offset: position, "unexpected end of data") }
    }

    mutating func expect(_ literal: StaticString) throws(JSONTapeError) {
      let count = literal.utf8CodeUnitCount
      guard position + count <= bytes.count,
        memcmp(bytes.baseAddress! + position, literal.utf8Start, count) == 0
      else { throw JSONTapeError(offset: position, "an unexpected character") }
      position += count
    }

    @inline(__always)
    mutating func parseValue(into entries: inout [Entry], depth: Int) throws(JSONTapeError) {
      let start = position
      let index = UInt32(entries.count)
      switch bytes[position] {
      case UInt8(ascii: "{"):
        try parseContainer(.object, closedBy: UInt8(ascii: "}"), into: &entries, depth: depth)
      case UInt8(ascii: "["):
        try parseContainer(.array, closedBy: UInt8(ascii: "]"), into: &entries, depth: depth)
      case UInt8(ascii: "\""):
        try parseString(into: &entries)
      case UInt8(ascii: "t"):
        try expect("true")
        entries.append(
          Entry(kind: .true, flag: false, start: UInt32(start), end: UInt32(position), next: index + 1, count: 0)
        )
      case UInt8(ascii: "f"):
        try expect("false")
        entries.append(
          Entry(kind: .false, flag: false, start: UInt32(start), end: UInt32(position), next: index + 1, count: 0)
        )
      case UInt8(ascii: "n"):
        try expect("null")
        entries.append(
          Entry(kind: .null, flag: false, start: UInt32(start), end: UInt32(position), next: index + 1, count: 0)
        )
      default:
        try parseNumber(into: &entries)
      }
    }

    /// An object or an array from its opening bracket: its entry, then its members (an object's as key,
    /// value) or elements, separated by commas, up to `close`.
    mutating func parseContainer(
      _ kind: Kind,
      closedBy close: UInt8,
      into entries: inout [Entry],
      depth: Int
    ) throws(JSONTapeError) {
      guard depth < JSONTape.maximumDepth else { throw JSONTapeError(offset: position, "nested too deeply") }
      let index = entries.count
      entries.append(Entry(kind: kind, flag: false, start: UInt32(position), end: 0, next: 0, count: 0))
      position += 1
      try skipWhitespace()
      var count: UInt32 = 0
      if bytes[position] != close {
        while true {
          if kind == .object {
            guard bytes[position] == UInt8(ascii: "\"") else {
              throw JSONTapeError(offset: position, "a key must be a string")
            }
            try parseString(into: &entries)
            try skipWhitespace()
            guard bytes[position] == UInt8(ascii: ":") else { throw JSONTapeError(offset: position, "expected ':'") }
            position += 1
            try skipWhitespace()
          }
          try parseValue(into: &entries, depth: depth + 1)
          count += 1
          try skipWhitespace()
          if bytes[position] == UInt8(ascii: ",") {
            position += 1
            try skipWhitespace()
            continue
          }
          guard bytes[position] == close else {
            throw JSONTapeError(offset: position, "expected ',' or '\(Character(Unicode.Scalar(close)))'")
          }
          break
        }
      }
      position += 1
      entries[index].count = count
      entries[index].end = UInt32(position)
      entries[index].next = UInt32(entries.count)
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    @inline(__always)
    mutating func parseNumber(into entries: inout [Entry]) throws(JSONTapeError) {
      let start = position
      var fractional = false
      func digit(_ at: Int) -> Bool {
        at < bytes.count && bytes[at] >= UInt8(ascii: "0") && bytes[at] <= UInt8(ascii: "9")
      }
      if bytes[position] == UInt8(ascii: "-") { position += 1 }
      guard digit(position) else { throw JSONTapeError(offset: position, "an unexpected character") }
      if bytes[position] == UInt8(ascii: "0") {
        position += 1
        if digit(position) { throw JSONTapeError(offset: position, "a number with a leading zero") }
      } else {
        while digit(position) { position += 1 }
      }
      if position < bytes.count && bytes[position] == UInt8(ascii: ".") {
        fractional = true
        position += 1
        guard digit(position) else { throw JSONTapeError(offset: position, "a fraction needs digits") }
        while digit(position) { position += 1 }
      }
      if position < bytes.count && (bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E")) {
        fractional = true
        position += 1
        if position < bytes.count && (bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-")) {
          position += 1
        }
        guard digit(position) else { throw JSONTapeError(offset: position, "an exponent needs digits") }
        while digit(position) { position += 1 }
      }
      let index = UInt32(entries.count)
      entries.append(
        Entry(kind: .number, flag: fractional, start: UInt32(start), end: UInt32(position), next: index + 1, count: 0)
      )
    }

    /// A string from its opening quote: control characters refused, escapes checked, UTF-8 validated.
    @inline(__always)
    mutating func parseString(into entries: inout [Entry]) throws(JSONTapeError) {
      position += 1
      let start = position
      var escaped = false
      while true {
        position = Self.firstSpecialByte(in: bytes, from: position)
        guard position < bytes.count else { throw JSONTapeError(offset: position, "a string is not closed") }
        let byte = bytes[position]
        if byte == UInt8(ascii: "\"") { break }
        if byte == UInt8(ascii: "\\") {
          escaped = true
          position += 2
          continue
        }
        if byte < 0x20 { throw JSONTapeError(offset: position, "a control character in a string") }
        try skipUTF8Sequence()
      }
      let raw = UnsafeBufferPointer(rebasing: bytes[start..<position])
      if escaped {
        _ = try JSONTape.unescape(ArraySlice(raw))
      }
      let index = UInt32(entries.count)
      entries.append(
        Entry(kind: .string, flag: escaped, start: UInt32(start), end: UInt32(position), next: index + 1, count: 0)
      )
      position += 1
    }

    /// The index of the first byte at or after `position` that a string's scan must look at (a quote, a
    /// backslash, a control character or a byte of a multi-byte sequence), or `bytes.count`.
    ///
    /// Eight bytes at a time while eight remain. Each test below sets the high bit of a byte that matches,
    /// and may also set it in bytes after a match (a borrow carries upwards), never before one; so the lowest
    /// set bit, in the little-endian word, is the first match.
    @inline(__always)
    static func firstSpecialByte(in bytes: UnsafeBufferPointer<UInt8>, from position: Int) -> Int {
      let ones: UInt64 = 0x0101_0101_0101_0101
      let highs: UInt64 = 0x8080_8080_8080_8080
      var position = position
      let base = UnsafeRawPointer(bytes.baseAddress!)
      while position + 8 <= bytes.count {
        let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position, as: UInt64.self))
        let quotes = word ^ (ones &* UInt64(UInt8(ascii: "\"")))
        let backslashes = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
        let matches =
          ((quotes &- ones) & ~quotes) | ((backslashes &- ones) & ~backslashes)
          | ((word &- ones &* 0x20) & ~word) | word
        let found = matches & highs
        if found != 0 { return position + found.trailingZeroBitCount / 8 }
        position += 8
      }
      while position < bytes.count {
        let byte = bytes[position]
        if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { return position }
        position += 1
      }
      return position
    }

    /// Steps over one multi-byte UTF-8 sequence, refusing overlong forms, surrogates and values over U+10FFFF.
    mutating func skipUTF8Sequence() throws(JSONTapeError) {
      let lead = bytes[position]
      let length: Int
      var lowest: UInt8 = 0x80
      var highest: UInt8 = 0xBF
      switch lead {
      case 0xC2...0xDF: length = 2
      case 0xE0:
        length = 3
        lowest = 0xA0
      case 0xE1...0xEC, 0xEE...0xEF: length = 3
      case 0xED:
        length = 3
        highest = 0x9F
      case 0xF0:
        length = 4
        lowest = 0x90
      case 0xF1...0xF3: length = 4
      case 0xF4:
        length = 4
        highest = 0x8F
      default: throw JSONTapeError(offset: position, "invalid UTF-8")
      }
      guard position + length <= bytes.count, bytes[position + 1] >= lowest, bytes[position + 1] <= highest else {
        throw JSONTapeError(offset: position, "invalid UTF-8")
      }
      for offset in 2..<length where bytes[position + offset] & 0xC0 != 0x80 {
        throw JSONTapeError(offset: position + offset, "invalid UTF-8")
      }
      position += length
    }
  }
}
