import Foundation

/// The event envelope's shape, which the coder reads and writes without containers: an object holding a
/// payload's members beside its own `id` (an integer), `type` (a string) and optional `origin`
/// (`EventProtocol`'s `EventEnvelope`, which calls these per event of a poll's answer). They are here, not in
/// `EventProtocol`, because they run per event: across the module boundary each of their steps on the tape or
/// the output would be a call the optimiser cannot inline (docs/json-coder.md, "Where the module boundary
/// is").

/// Where an envelope's own members are in an object on the tape, with its `id` read.
package struct EnvelopeMembers {
  /// The `id` member's value.
  package let id: Int
  /// The `origin` member's entry, `nil` when it is absent or `null`.
  package let origin: UInt32?
  /// The `type` member's entry, `nil` when it is absent (a key-not-found error once the origin is read, the
  /// order `Codable`'s path reports them in).
  package let type: UInt32?
}

extension JSONTape {
  /// Calls `element` for each element of the array at `array` (the value of `decoder`'s member `key`), in
  /// order, with the element's entry and the depth of its coding path (an `Array`'s `init(from:)`'s: `key`,
  /// then the element's index, pushed on ``path`` while `element` runs).
  /// - Throws: A type mismatch when `array` is not an array; what `element` throws.
  package func forEachElement(
    of array: UInt32,
    key: some CodingKey,
    decoder: JSONTapeDecoder,
    _ element: (_ entry: UInt32, _ depth: Int) throws -> Void
  ) throws {
    path.removeSubrange(min(decoder.depth, path.count)...)
    path.append(key)
    defer { path.removeLast() }
    guard self[array].kind == .array else { throw mismatch([Int].self, at: array, path: Array(path)) }
    var entry = array + 1
    for position in 0..<Int(self[array].count) {
      path.append(JSONIndexKey(intValue: position))
      defer { path.removeLast() }
      try element(entry, path.count)
      entry = self[entry].next
    }
  }

  /// Finds the envelope's own members in the object at `object` and reads its `id`.
  /// - Parameter path: The object's coding path, for errors.
  /// - Throws: What `EventEnvelope`'s `init(from:)` throws for them: a type mismatch when `object` is not an
  ///   object, `keyNotFound` without an `id`, the integer's errors for a bad `id`.
  package func envelopeMembers(of object: UInt32, path: @autoclosure () -> [any CodingKey]) throws -> EnvelopeMembers {
    guard self[object].kind == .object else { throw mismatch([String: Int].self, at: object, path: path()) }
    // One pass over the keys for all three (each the first of its name, as `member(named:of:)` finds it),
    // where three lookups compared most keys three times.
    var found: (id: UInt32?, origin: UInt32?, type: UInt32?) = (nil, nil, nil)
    var member = object + 1
    for _ in 0..<self[object].count {
      switch envelopeKey(at: member) {
      case .id?: if found.id == nil { found.id = member + 1 }
      case .origin?: if found.origin == nil { found.origin = member + 1 }
      case .type?: if found.type == nil { found.type = member + 1 }
      case nil: break
      }
      member = self[member + 1].next
    }
    guard let idIndex = found.id else {
      throw JSONTape.keyNotFound(JSONIndexKey(stringValue: "id"), path: path())
    }
    let id = try decodeInteger(Int.self, at: idIndex, path: path() + [JSONIndexKey(stringValue: "id")])
    var origin: UInt32?
    if let originIndex = found.origin, self[originIndex].kind != .null {
      origin = originIndex
    }
    return EnvelopeMembers(id: id, origin: origin, type: found.type)
  }

  /// Which of the envelope's own keys the key at `index` is, if any.
  private func envelopeKey(at index: UInt32) -> EnvelopeKey? {
    let entry = self[index]
    if entry.flag { return EnvelopeKey(rawValue: string(at: index)) }
    return bytes.withUnsafeBufferPointer { bytes in
      let start = Int(entry.start)
      switch entry.end - entry.start {
      case 2:
        return bytes[start] == UInt8(ascii: "i") && bytes[start + 1] == UInt8(ascii: "d") ? .id : nil
      case 4:
        let isType =
          bytes[start] == UInt8(ascii: "t") && bytes[start + 1] == UInt8(ascii: "y")
          && bytes[start + 2] == UInt8(ascii: "p") && bytes[start + 3] == UInt8(ascii: "e")
        return isType ? .type : nil
      case 6:
        return memcmp(bytes.baseAddress! + start, "origin", 6) == 0 ? .origin : nil
      default:
        return nil
      }
    }
  }
}

/// The envelope's own keys, as ``JSONTape/envelopeMembers(of:path:)`` tells them apart.
private enum EnvelopeKey: String {
  case id, origin, type
}

extension JSONOutput {
  /// Writes the member `key` of the object `serial` at `depth` as an array of `count` elements, each written
  /// by `element` through the encoder of its own value (closed after it), as an `Array`'s `encode(to:)` would.
  package func writeArrayMember(
    _ key: some CodingKey,
    at depth: Int,
    serial: UInt32,
    count: Int,
    _ element: (_ position: Int, _ encoder: JSONValueEncoder) throws -> Void
  ) throws {
    try beginMember(key.stringValue, at: depth, serial: serial)
    let arrayDepth = pushValue(key: key)
    let arraySerial = beginArray(at: arrayDepth)
    for position in 0..<count {
      _ = try beginElement(at: arrayDepth, serial: arraySerial)
      let elementDepth = pushValue(key: JSONIndexKey(intValue: position))
      try element(position, JSONValueEncoder(output: self, depth: elementDepth))
      closeValues(downTo: elementDepth)
    }
    closeValues(downTo: arrayDepth)
  }

  /// The envelope's own keys, in their order.
  private static let envelopeKeys: [[UInt8]] = [Array("id".utf8), Array("origin".utf8), Array("type".utf8)]

  /// Writes an event envelope whose payload's members were kept (``EncodedMembers``) into an output that does
  /// not sort keys (a journal entry's): `{`, those members as they were kept, `id`, `type`, `origin`, `}`. These
  /// are the bytes the envelope's `Codable` path writes there (the payload's members spliced, then the
  /// envelope's own), without finding each member for a sort that will not happen.
  package func writeEnvelopeUnsorted(
    _ encoded: EncodedMembers,
    id: Int,
    type: String,
    origin: (any Encodable)?
  ) throws {
    bytes.append(UInt8(ascii: "{"))
    if !encoded.isEmpty {
      bytes.append(contentsOf: encoded.members)
      bytes.append(UInt8(ascii: ","))
    }
    bytes.append(contentsOf: #""id":"#.utf8)
    write(Int64(id))
    bytes.append(contentsOf: #","type":"#.utf8)
    write(type)
    if let origin {
      bytes.append(contentsOf: #","origin":"#.utf8)
      try encodeValue(origin, key: JSONIndexKey(stringValue: "origin"))
    }
    bytes.append(UInt8(ascii: "}"))
  }

  /// Writes the envelope of ``writeEnvelope(_:id:type:origin:)`` without an origin, when its members are in
  /// key order with their cuts known and its type needs no escape: the same bytes, each copied once into
  /// room made for them all, instead of a dozen appends that each check the array's capacity and uniqueness.
  /// - Returns: `false`, having written nothing, when `type` needs an escape.
  private func writeInPlace(
    _ object: [UInt8],
    cuts: (id: UInt32, origin: UInt32, type: UInt32),
    id: Int,
    type: String
  ) -> Bool {
    var type = type
    return type.withUTF8 { type in
      guard Self.needsNoEscape(type) else { return false }
      let magnitude = id.magnitude
      var digits = 1
      var rest = magnitude / 10
      while rest > 0 {
        digits += 1
        rest /= 10
      }
      // The runs with the commas between the parts take at most the object's bytes (each run leaves out the
      // separator after it); then `{`, `}`, `"id":`, a sign and the digits, `"type":` and the quoted type, and
      // two bytes to spare.
      let most = object.count + 3 + 5 + 1 + digits + 7 + type.count + 2 + 1
      let start = bytes.count
      bytes.append(contentsOf: repeatElement(0, count: most))
      let written = bytes.withUnsafeMutableBufferPointer { buffer in
        object.withUnsafeBufferPointer { object in
          var out = buffer.baseAddress! + start
          let origin = out
          var wroteMember = false
          func copy(_ bytes: UnsafeBufferPointer<UInt8>) {
            out.update(from: bytes.baseAddress!, count: bytes.count)
            out += bytes.count
          }
          func put(_ byte: UInt8) {
            out.pointee = byte
            out += 1
          }
          // Members `from..<to` are the bytes up to the comma (or the brace) before `to`.
          func run(from: Int, to: Int) {
            guard from < to, from < object.count - 1 else { return }
            if wroteMember { put(UInt8(ascii: ",")) }
            copy(UnsafeBufferPointer(rebasing: object[from..<(to - 1)]))
            wroteMember = true
          }
          func key(_ name: StaticString) {
            if wroteMember { put(UInt8(ascii: ",")) }
            put(UInt8(ascii: "\""))
            copy(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            put(UInt8(ascii: "\""))
            put(UInt8(ascii: ":"))
            wroteMember = true
          }
          put(UInt8(ascii: "{"))
          run(from: 1, to: Int(cuts.id))
          key("id")
          if id < 0 { put(UInt8(ascii: "-")) }
          var remaining = magnitude
          for place in stride(from: digits - 1, through: 0, by: -1) {
            out[place] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: remaining % 10)
            remaining /= 10
          }
          out += digits
          run(from: Int(cuts.id), to: Int(cuts.origin))
          run(from: Int(cuts.origin), to: Int(cuts.type))
          key("type")
          put(UInt8(ascii: "\""))
          copy(type)
          put(UInt8(ascii: "\""))
          run(from: Int(cuts.type), to: object.count)
          put(UInt8(ascii: "}"))
          return out - origin
        }
      }
      bytes.removeLast(most - written)
      return true
    }
  }

  /// Writes an event envelope (`EventProtocol`'s `EventEnvelope`: a payload's members beside `id`, `type` and an
  /// optional `origin`) whose payload's members were kept (``EncodedMembers``): `{`, those members in key
  /// order with `id`, `origin` and `type` merged in where their keys sort, `}`. These are the bytes sorting
  /// the envelope's members when it closes writes, without moving any bytes twice: the payload's few members
  /// are ordered as offsets (already in order, the usual case, this is one comparison each), then copied.
  /// A key written twice keeps its last value, as sorting does (and `JSONEncoder`): a payload's own repeated
  /// key its last, a payload key equal to one of the envelope's (which a payload must not use) the envelope's.
  /// - Returns: `false`, having written nothing, when a payload key has an escape (keys then compare
  ///   unescaped); the envelope is then written and sorted as any object.
  package func writeEnvelope(
    _ encoded: EncodedMembers,
    id: Int,
    type: String,
    origin: (any Encodable)?
  ) throws -> Bool {
    let object = encoded.object
    if let cuts = encoded.envelopeCuts, origin == nil, writeInPlace(object, cuts: cuts, id: id, type: type) {
      return true
    }
    if let cuts = encoded.envelopeCuts {
      // The members are in key order: copy the runs between the envelope's own members.
      let cutID = Int(cuts.id)
      let cutOrigin = Int(cuts.origin)
      let cutType = Int(cuts.type)
      var written = false
      func run(from start: Int, to end: Int) {
        // Members `start..<end` are the bytes up to the comma (or the brace) before `end`.
        guard start < end, start < object.count - 1 else { return }
        if written { bytes.append(UInt8(ascii: ",")) }
        object.withUnsafeBufferPointer {
          bytes.append(contentsOf: UnsafeBufferPointer(rebasing: $0[start..<(end - 1)]))
        }
        written = true
      }
      func key(_ name: StaticString) {
        if written { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        written = true
      }
      bytes.append(UInt8(ascii: "{"))
      run(from: 1, to: cutID)
      key("id")
      write(Int64(id))
      run(from: cutID, to: cutOrigin)
      if let origin {
        key("origin")
        try encodeValue(origin, key: JSONIndexKey(stringValue: "origin"))
      }
      run(from: cutOrigin, to: cutType)
      key("type")
      write(type)
      run(from: cutType, to: object.count)
      bytes.append(UInt8(ascii: "}"))
      return true
    }
    var members = mergingMembers
    mergingMembers = []
    defer { mergingMembers = members }
    let (sorted, escaped) = encoded.findMembers(into: &members)
    if escaped { return false }
    if !sorted {
      // Insertion sort, stable: a member moves only past keys greater than its own.
      for unsorted in members.indices.dropFirst() {
        let member = members[unsorted]
        var place = unsorted
        while place > 0,
          object[(member.start + 1)..<member.keyEnd].lexicographicallyPrecedes(
            object[(members[place - 1].start + 1)..<members[place - 1].keyEnd]
          )
        {
          members[place] = members[place - 1]
          place -= 1
        }
        members[place] = member
      }
    }
    bytes.append(UInt8(ascii: "{"))
    var nextKey = 0
    var first = true
    func separate() {
      if !first { bytes.append(UInt8(ascii: ",")) }
      first = false
    }
    /// Writes the envelope's members whose keys sort before `key` (all that are left when it is `nil`).
    /// - Returns: Whether the envelope's next member has the key `key` (and replaces the payload's).
    func writeEnvelopeMembers(before key: ArraySlice<UInt8>?) throws -> Bool {
      while nextKey < Self.envelopeKeys.count {
        if nextKey == 1 && origin == nil {
          nextKey += 1
          continue
        }
        if let key, !Self.envelopeKeys[nextKey].lexicographicallyPrecedes(key) {
          return Self.envelopeKeys[nextKey].elementsEqual(key)
        }
        separate()
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: Self.envelopeKeys[nextKey])
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        switch nextKey {
        case 0: write(Int64(id))
        case 1: if let origin { try encodeValue(origin, key: JSONIndexKey(stringValue: "origin")) }
        default: write(type)
        }
        nextKey += 1
      }
      return false
    }
    for (position, member) in members.enumerated() {
      let key = object[(member.start + 1)..<member.keyEnd]
      if try writeEnvelopeMembers(before: key) { continue }
      if position + 1 < members.count,
        key.elementsEqual(object[(members[position + 1].start + 1)..<members[position + 1].keyEnd])
      {
        continue
      }
      separate()
      bytes.append(contentsOf: object[member.start..<member.end])
    }
    _ = try writeEnvelopeMembers(before: nil)
    bytes.append(UInt8(ascii: "}"))
    return true
  }
}
