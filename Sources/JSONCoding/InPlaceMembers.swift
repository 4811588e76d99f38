/// Writes an object's parts through a pointer, into room made for them in a ``JSONOutput``
/// (``JSONOutput/appendInPlace(of:most:wroteMember:_:)``): runs of members copied from an encoded object,
/// keys, integers and strings that need no escape. Each part is one copy, where appending it to the output
/// would check the array's capacity and uniqueness each time. Its steps are always inlined: they run per event
/// of a poll's answer, where a call each costs W3's encode about 3 %.
struct InPlaceMembers {
  /// The encoded object the runs are copied from, `{` to `}`.
  let object: UnsafeBufferPointer<UInt8>
  /// Where the next byte goes.
  var out: UnsafeMutablePointer<UInt8>
  /// Whether a member was written (so the next one is after a comma).
  var wroteMember: Bool

  /// The most bytes ``integer(_:)`` writes: a sign and 19 digits.
  static let integerRoom = 20

  @inline(__always) mutating func put(_ byte: UInt8) {
    out.pointee = byte
    out += 1
  }

  @inline(__always) mutating func copy(_ bytes: UnsafeBufferPointer<UInt8>) {
    out.update(from: bytes.baseAddress!, count: bytes.count)
    out += bytes.count
  }

  /// The object's members from `start` to `end` (byte offsets, each the start of a member, or the closing
  /// brace): the bytes up to the comma (or the brace) before `end`. Nothing when there are none.
  @inline(__always) mutating func run(from start: Int, to end: Int) {
    guard start < end, start < object.count - 1 else { return }
    if wroteMember { put(UInt8(ascii: ",")) }
    copy(UnsafeBufferPointer(rebasing: object[start..<(end - 1)]))
    wroteMember = true
  }

  /// `"name":`, after a comma when a member came before.
  @inline(__always) mutating func key(_ name: StaticString) {
    if wroteMember { put(UInt8(ascii: ",")) }
    put(UInt8(ascii: "\""))
    copy(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
    put(UInt8(ascii: "\""))
    put(UInt8(ascii: ":"))
    wroteMember = true
  }

  /// `value` in decimal, as `write(_: Int64)` writes it.
  @inline(__always) mutating func integer(_ value: Int) {
    if value < 0 { put(UInt8(ascii: "-")) }
    let magnitude = value.magnitude
    var digits = 1
    var rest = magnitude / 10
    while rest > 0 {
      digits += 1
      rest /= 10
    }
    var remaining = magnitude
    for place in stride(from: digits - 1, through: 0, by: -1) {
      out[place] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: remaining % 10)
      remaining /= 10
    }
    out += digits
  }

  /// `"text"`, for text that needs no escape (``JSONOutput/needsNoEscape(_:)``).
  @inline(__always) mutating func plainString(_ text: UnsafeBufferPointer<UInt8>) {
    put(UInt8(ascii: "\""))
    copy(text)
    put(UInt8(ascii: "\""))
  }
}

extension JSONOutput {
  /// Appends what `body` writes through an ``InPlaceMembers`` over `object`, into room for at most `most`
  /// bytes made at once (what is not used is cut off); `wroteMember` carries on from one call to the next.
  @inline(__always) func appendInPlace(
    of object: UnsafeBufferPointer<UInt8>,
    most: Int,
    wroteMember: inout Bool,
    _ body: (inout InPlaceMembers) -> Void
  ) {
    let start = bytes.count
    bytes.append(contentsOf: repeatElement(0, count: most))
    let written = bytes.withUnsafeMutableBufferPointer { buffer in
      var writer = InPlaceMembers(object: object, out: buffer.baseAddress! + start, wroteMember: wroteMember)
      body(&writer)
      wroteMember = writer.wroteMember
      return writer.out - (buffer.baseAddress! + start)
    }
    bytes.removeLast(most - written)
  }
}
