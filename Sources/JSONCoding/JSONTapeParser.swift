import Foundation

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
  struct Parser {
    let bytes: UnsafeBufferPointer<UInt8>
    var position: Int
    /// The root object's member to stream, until it is found.
    var stream: StreamedMember?

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
          if depth == 0, kind == .object, stream != nil, bytes[position] == UInt8(ascii: "["),
            streams(key: entries[entries.count - 1])
          {
            try parseStreamedArray(into: &entries)
          } else {
            try parseValue(into: &entries, depth: depth + 1)
          }
          guard try moreValues(after: &count, closedBy: close) else { break }
        }
      }
      position += 1
      entries[index].count = count
      entries[index].end = UInt32(position)
      entries[index].next = UInt32(entries.count)
    }

    /// Counts the value just parsed in its container, then steps over the comma after it, if any.
    /// - Returns: Whether another value follows; at `close`, which the caller steps over, `false`.
    @inline(__always)
    mutating func moreValues(after count: inout UInt32, closedBy close: UInt8) throws(JSONTapeError) -> Bool {
      guard count < JSONTape.maximumCount else {
        throw JSONTapeError(offset: position, "more than \(JSONTape.maximumCount) values in one container")
      }
      count += 1
      try skipWhitespace()
      if bytes[position] == UInt8(ascii: ",") {
        position += 1
        try skipWhitespace()
        return true
      }
      guard bytes[position] == close else {
        throw JSONTapeError(offset: position, "expected ',' or '\(Character(Unicode.Scalar(close)))'")
      }
      return false
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
