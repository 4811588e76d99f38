import Foundation

/// The bytes of one JSON document being written in a single pass, and the values still open in it.
///
/// Each value being encoded has an entry on ``open`` at its depth: `pending` until it asks for a container,
/// then an object, an array or a single value. A value is closed when its `encode(to:)` returns, or when a
/// shallower container writes again (a nested container has no end of its own). Objects are written in the
/// order their members are encoded; with ``sortsKeys`` an object whose keys are out of order is rewritten in
/// place when it closes, so the output equals `JSONEncoder`'s with `.sortedKeys` (keys compare as UTF-8).
package final class JSONOutput {
  /// What an open value has become.
  enum Kind: UInt8 {
    /// Its `encode(to:)` has not yet asked for a container: closing it writes `{}`, as `JSONEncoder` does.
    case pending
    case object
    case array
    /// A single value container wrote it.
    case single
  }

  /// A value still being written.
  struct OpenValue {
    var kind: Kind
    /// Which value this is, so a container that outlived its value is refused instead of writing elsewhere.
    var serial: UInt32
    /// Members or elements written so far.
    var count: Int
    /// Where this object's member offsets begin in ``memberStarts``.
    var membersBase: Int
    /// The key this value was encoded under (`nil` at the top), for `codingPath`.
    var key: (any CodingKey)?
  }

  // `@exclusivity(unchecked)`: the dynamic exclusivity checks of these properties were a quarter of the
  // encoder's time (`perf`, Bench W3). They can never fire: an output is not `Sendable`, lives for one
  // `WireJSON.encode` call on one thread, and no method of it holds an access to a property while calling
  // code that could touch that property again (the values' `encode(to:)` run between its accesses, never
  // inside one).
  @exclusivity(unchecked) package var bytes: [UInt8] = []
  package let sortsKeys: Bool
  @exclusivity(unchecked) private(set) var open: [OpenValue] = []
  /// The offset of each member (its key's opening quote) of every open object, innermost last.
  @exclusivity(unchecked) private var memberStarts: [Int] = []
  @exclusivity(unchecked) private var lastSerial: UInt32 = 0
  /// The digits of a `\u00XX` escape.
  private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
  /// The members of the object ``sortMembers(from:)`` is reordering (reused: it runs for most objects).
  @exclusivity(unchecked) private var sortingMembers: [(range: Range<Int>, key: (range: Range<Int>, escaped: Bool))] =
    []
  /// Where ``sortMembers(from:)`` reorders an object's members.
  @exclusivity(unchecked) private var scratch: [UInt8] = []
  /// The members of a payload being merged into its envelope (`writeEnvelope`; reused): where each starts,
  /// ends and where its key ends, in key order.
  @exclusivity(unchecked) package var mergingMembers: [(start: Int, end: Int, keyEnd: Int)] = []
  /// The last type ``stringKeyedDictionary(_:)`` found not to be a dictionary with `String` keys.
  @exclusivity(unchecked) var lastTypeNotStringKeyed: ObjectIdentifier?
  /// False when the top-level value asked for no container (`JSONEncoder` refuses such a value).
  @exclusivity(unchecked) private(set) var askedForContainer = true

  /// With ``sortsKeys``, whether the top-level object is left in the order its members were written (its
  /// members are to be spliced into another object, which sorts them there).
  let leavesTopLevelUnsorted: Bool
  /// Whether ``JSONFieldsCodable`` values write their own fields (false only to compare with their `Codable`
  /// path: ``JSONFieldsParity``).
  var writesFields = true

  init(sortsKeys: Bool, leavesTopLevelUnsorted: Bool = false, capacity: Int = 256) {
    self.sortsKeys = sortsKeys
    self.leavesTopLevelUnsorted = leavesTopLevelUnsorted
    bytes.reserveCapacity(capacity)
  }

  /// The keys leading to the value at `depth`.
  func codingPath(_ depth: Int) -> [any CodingKey] {
    let last = min(depth, open.count - 1)
    guard last >= 1 else { return [] }
    return open[1...last].compactMap(\.key)
  }

  // MARK: Values and containers

  /// Opens a pending value at the next depth and returns its depth.
  package func pushValue(key: (any CodingKey)?) -> Int {
    lastSerial &+= 1
    open.append(OpenValue(kind: .pending, serial: lastSerial, count: 0, membersBase: 0, key: key))
    return open.count - 1
  }

  /// Closes every value at `depth` and deeper.
  package func closeValues(downTo depth: Int) {
    while open.count > depth {
      let value = open.removeLast()
      switch value.kind {
      case .pending:
        if open.isEmpty { askedForContainer = false }
        bytes.append(contentsOf: [UInt8(ascii: "{"), UInt8(ascii: "}")])
      case .object:
        if sortsKeys && value.count > 1 && !(leavesTopLevelUnsorted && open.isEmpty) {
          sortMembers(from: value.membersBase)
        }
        memberStarts.removeSubrange(value.membersBase...)
        bytes.append(UInt8(ascii: "}"))
      case .array: bytes.append(UInt8(ascii: "]"))
      case .single: break
      }
    }
  }

  /// Makes the value at `depth` an object (or returns the object it already is) and returns its serial.
  package func beginObject(at depth: Int) -> UInt32 {
    closeValues(downTo: depth + 1)
    switch open[depth].kind {
    case .pending:
      open[depth].kind = .object
      open[depth].membersBase = memberStarts.count
      bytes.append(UInt8(ascii: "{"))
    case .object: break
    case .array, .single:
      preconditionFailure("a keyed container was asked for a value already encoded as \(open[depth].kind)")
    }
    return open[depth].serial
  }

  /// Makes the value at `depth` an array and returns its serial.
  package func beginArray(at depth: Int) -> UInt32 {
    closeValues(downTo: depth + 1)
    switch open[depth].kind {
    case .pending:
      open[depth].kind = .array
      bytes.append(UInt8(ascii: "["))
    case .array: break
    case .object, .single:
      preconditionFailure("an unkeyed container was asked for a value already encoded as \(open[depth].kind)")
    }
    return open[depth].serial
  }

  /// Marks the value at `depth` as written by a single value container.
  package func beginSingleValue(at depth: Int) throws {
    closeValues(downTo: depth + 1)
    guard open.count > depth, open[depth].kind == .pending else {
      throw EncodingError.invalidValue(
        (),
        .init(codingPath: codingPath(depth), debugDescription: "a single value container encoded a second value")
      )
    }
    open[depth].kind = .single
  }

  /// Checks that the container `serial` at `depth` is still open, closing anything deeper.
  private func enter(_ depth: Int, _ serial: UInt32) throws {
    if open.count > depth + 1 { closeValues(downTo: depth + 1) }
    guard open.count > depth, open[depth].serial == serial else {
      throw EncodingError.invalidValue(
        (),
        .init(codingPath: [], debugDescription: "a container was used after the value it belongs to was encoded")
      )
    }
  }

  /// Starts a member of the object `serial` at `depth`: its separator and key.
  package func beginMember(_ key: String, at depth: Int, serial: UInt32) throws {
    if try countMember(at: depth, serial: serial) { bytes.append(UInt8(ascii: ",")) }
    write(key)
    bytes.append(UInt8(ascii: ":"))
  }

  /// Counts a member of the object `serial` at `depth` whose separator and key its caller then writes (a sort
  /// finds the key's opening quote after the separator).
  /// - Returns: Whether a separator goes before it.
  func countMember(at depth: Int, serial: UInt32) throws -> Bool {
    try enter(depth, serial)
    let separated = open[depth].count > 0
    open[depth].count += 1
    // Only a sort reads where members start.
    if sortsKeys { memberStarts.append(bytes.count + (separated ? 1 : 0)) }
    return separated
  }

  /// Starts members written at once into the object `serial` at `depth` (``splice(_:at:serial:)``): the
  /// separator before them. Each must then be registered with ``registerMember(at:)``, and their number given
  /// to ``endSplice(at:count:)``.
  /// - Returns: What to add to an offset in the spliced object's own bytes (its first member at 1) for its
  ///   place in ``bytes``.
  func beginSplice(at depth: Int, serial: UInt32) throws -> Int {
    try enter(depth, serial)
    if open[depth].count > 0 { bytes.append(UInt8(ascii: ",")) }
    return bytes.count - 1
  }

  /// Counts the `count` members a splice wrote into the object at `depth`.
  func endSplice(at depth: Int, count: Int) {
    open[depth].count += count
  }

  /// Registers a spliced member whose key's opening quote is at `offset`, for the object's key sort.
  func registerMember(at offset: Int) {
    if sortsKeys { memberStarts.append(offset) }
  }

  /// Starts an element of the array `serial` at `depth` and returns its index.
  package func beginElement(at depth: Int, serial: UInt32) throws -> Int {
    try enter(depth, serial)
    let index = open[depth].count
    if index > 0 { bytes.append(UInt8(ascii: ",")) }
    open[depth].count += 1
    return index
  }

  // MARK: Sorting an object's members

  /// Rewrites the members from `base` (the innermost object's) in key order, if they are not in it already.
  ///
  /// Keys are compared in place (no slice of ``bytes`` is held, so the rewrite changes the buffer in place
  /// instead of copying it); the members are reordered through ``scratch``, which is reused.
  private func sortMembers(from base: Int) {
    var previous = keyRange(at: memberStarts[base])
    var sorted = true
    for index in (base + 1)..<memberStarts.count {
      let current = keyRange(at: memberStarts[index])
      if !precedes(previous, current) {
        sorted = false
        break
      }
      previous = current
    }
    if sorted { return }
    let count = memberStarts.count - base
    var members = sortingMembers
    sortingMembers = []
    members.removeAll(keepingCapacity: true)
    members.reserveCapacity(count)
    for index in base..<memberStarts.count {
      let end = index + 1 < memberStarts.count ? memberStarts[index + 1] - 1 : bytes.count
      members.append((memberStarts[index]..<end, keyRange(at: memberStarts[index])))
    }
    // Stable: members with the same key stay in the order they were written, and the last one is kept, as
    // `JSONEncoder` keeps the last value encoded for a key.
    members.sort { precedes($0.key, $1.key) }
    let regionStart = memberStarts[base]
    scratch.removeAll(keepingCapacity: true)
    for (position, member) in members.enumerated() {
      if position + 1 < members.count, !precedes(member.key, members[position + 1].key) { continue }
      if !scratch.isEmpty { scratch.append(UInt8(ascii: ",")) }
      scratch.append(contentsOf: bytes[member.range])
    }
    bytes.replaceSubrange(regionStart..<bytes.count, with: scratch)
    sortingMembers = members
  }

  /// Where the key of the member whose opening quote is at `start` lies, and whether it has escapes.
  private func keyRange(at start: Int) -> (range: Range<Int>, escaped: Bool) {
    var end = start + 1
    var escaped = false
    while bytes[end] != UInt8(ascii: "\"") {
      if bytes[end] == UInt8(ascii: "\\") {
        escaped = true
        end += 1
      }
      end += 1
    }
    return ((start + 1)..<end, escaped)
  }

  /// Whether key `a` sorts before key `b`, comparing their UTF-8 (unescaped when they have escapes).
  private func precedes(_ a: (range: Range<Int>, escaped: Bool), _ b: (range: Range<Int>, escaped: Bool)) -> Bool {
    if a.escaped || b.escaped {
      let left = (try? JSONTape.unescape(bytes[a.range])) ?? []
      let right = (try? JSONTape.unescape(bytes[b.range])) ?? []
      return left.lexicographicallyPrecedes(right)
    }
    return bytes.withUnsafeBufferPointer { buffer in
      let common = min(a.range.count, b.range.count)
      let order =
        common == 0
        ? 0 : memcmp(buffer.baseAddress! + a.range.lowerBound, buffer.baseAddress! + b.range.lowerBound, common)
      return order != 0 ? order < 0 : a.range.count < b.range.count
    }
  }

  // MARK: Scalars

  func writeNull() {
    bytes.append(contentsOf: [UInt8(ascii: "n"), UInt8(ascii: "u"), UInt8(ascii: "l"), UInt8(ascii: "l")])
  }

  package func write(_ value: Bool) {
    if value {
      bytes.append(contentsOf: [UInt8(ascii: "t"), UInt8(ascii: "r"), UInt8(ascii: "u"), UInt8(ascii: "e")])
    } else {
      bytes.append(contentsOf: [
        UInt8(ascii: "f"), UInt8(ascii: "a"), UInt8(ascii: "l"), UInt8(ascii: "s"), UInt8(ascii: "e"),
      ])
    }
  }

  package func write(_ value: Int64) {
    if value < 0 {
      bytes.append(UInt8(ascii: "-"))
      write(value.magnitude)
    } else {
      write(UInt64(value))
    }
  }

  package func write(_ value: UInt64) {
    if value < 10 {
      bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value))
      return
    }
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for UInt64.max's 20 digits
    withUnsafeMutableBytes(of: &digits) { buffer in
      var remaining = value
      var index = buffer.count
      while remaining > 0 {
        index -= 1
        buffer[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: remaining % 10)
        remaining /= 10
      }
      bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[index...]))
    }
  }

  /// Writes a floating-point number as `JSONEncoder` does: its shortest description without a `.0` ending.
  /// - Parameter codingPath: Where the number is, for the error a non-finite one throws.
  package func write<Number: BinaryFloatingPoint & LosslessStringConvertible>(
    _ value: Number,
    codingPath: @autoclosure () -> [any CodingKey]
  ) throws {
    guard value.isFinite else {
      throw EncodingError.invalidValue(
        value,
        .init(
          codingPath: codingPath(),
          debugDescription: "Unable to encode \(Number.self).\(value) directly in JSON."
        )
      )
    }
    var text = value.description
    if text.hasSuffix(".0") { text.removeLast(2) }
    bytes.append(contentsOf: text.utf8)
  }

  /// How many bytes each byte of a string takes once written inside quotes, as `JSONEncoder` escapes it: 2 for
  /// `\"`, `\\`, `\/` and the control characters with a short escape, 6 for the other control characters
  /// (`\u00XX`), 1 for the rest. ``write(_:)-(String)`` escapes exactly the bytes this counts as more than 1.
  private static let writtenLengths: [UInt8] = (0...255).map { byte in
    switch UInt8(byte) {
    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), 0x08, 0x0C, 0x0A, 0x0D, 0x09: 2
    case ..<0x20: 6
    default: 1
    }
  }

  /// Whether ``write(_:)-(String)`` writes these UTF-8 bytes as they are, between quotes.
  static func needsNoEscape(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
    writtenLengths.withUnsafeBufferPointer { writtenLengths in
      for byte in utf8 where writtenLengths[Int(byte)] > 1 { return false }
      return true
    }
  }

  /// How many bytes ``write(_:)-(String)`` writes for `value`: its UTF-8, its quotes and its escapes.
  static func quotedLength(of value: String) -> Int {
    value.utf8.reduce(2) { $0 + Int(writtenLengths[Int($1)]) }
  }

  /// Writes a string, quoted and escaped as `JSONEncoder` escapes it (including `/` as `\/`).
  package func write(_ value: String) {
    var value = value
    value.withUTF8 { utf8 in
      Self.writtenLengths.withUnsafeBufferPointer { writtenLengths in
        bytes.append(UInt8(ascii: "\""))
        var runStart = 0
        for index in 0..<utf8.count {
          let byte = utf8[index]
          guard writtenLengths[Int(byte)] > 1 else { continue }
          if runStart < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index])) }
          runStart = index + 1
          bytes.append(UInt8(ascii: "\\"))
          switch byte {
          case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(byte)
          case 0x08: bytes.append(UInt8(ascii: "b"))
          case 0x0C: bytes.append(UInt8(ascii: "f"))
          case 0x0A: bytes.append(UInt8(ascii: "n"))
          case 0x0D: bytes.append(UInt8(ascii: "r"))
          case 0x09: bytes.append(UInt8(ascii: "t"))
          default:
            bytes.append(contentsOf: [
              UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), Self.hexDigits[Int(byte >> 4)],
              Self.hexDigits[Int(byte & 0xF)],
            ])
          }
        }
        if runStart < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
        bytes.append(UInt8(ascii: "\""))
      }
    }
  }
}
