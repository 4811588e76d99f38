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
    guard !self[array].isStreamed else { throw streamedArrayRead(path: Array(path)) }
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
  /// - Parameter writtenWhole: Writes the element at `position` whole, straight into ``bytes``, when it can
  ///   without an encoder (nothing in it can fail or needs a coding path), and says whether it did; `element`
  ///   writes the others. Opening and closing a value for an element costs more than copying a small one.
  package func writeArrayMember(
    _ key: some CodingKey,
    at depth: Int,
    serial: UInt32,
    count: Int,
    writtenWhole: (_ position: Int) -> Bool = { _ in false },
    _ element: (_ position: Int, _ encoder: JSONValueEncoder) throws -> Void
  ) throws {
    try beginMember(key.stringValue, at: depth, serial: serial)
    let arrayDepth = pushValue(key: key)
    let arraySerial = beginArray(at: arrayDepth)
    for position in 0..<count {
      _ = try beginElement(at: arrayDepth, serial: arraySerial)
      if writtenWhole(position) { continue }
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

  /// Writes an event envelope with no origin whose payload's members were kept, whole and in one copy, as
  /// ``writeEnvelope(_:id:type:origin:)`` (sorted keys) or ``writeEnvelopeUnsorted(_:id:type:origin:)`` writes
  /// it, when that needs nothing but copies: its type needs no escape and, for sorted keys, the members are in
  /// key order (``EncodedMembers/envelopeCuts``). Nothing in it can fail, so it needs no open value (a poll's
  /// answer and a journal entry write their envelopes through it, ``writeArrayMember(_:at:serial:count:writtenWhole:_:)``).
  /// - Returns: Whether it wrote the envelope; nothing is written when it did not.
  package func writePlainEnvelope(_ encoded: EncodedMembers, id: Int, type: String) -> Bool {
    // Unsorted, the envelope's own members go after the payload's: where cuts at the end put them.
    let end = UInt32(encoded.object.count)
    guard let cuts = sortsKeys ? encoded.envelopeCuts : (end, end, end) else { return false }
    var typeBytes = type
    return typeBytes.withUTF8 { typeBytes in
      guard Self.needsNoEscape(typeBytes) else { return false }
      encoded.object.withUnsafeBufferPointer { object in
        writePlainInCutOrder(object, cuts: cuts, id: id, type: typeBytes)
      }
      return true
    }
  }

  /// The room an envelope's own keys take besides their values: `{`, `}`, and each key with its quotes, colon
  /// and comma.
  private static let envelopeKeysRoom = 3 + 6 + 10 + 8

  /// Writes an envelope with no origin and a type that needs no escape: its payload's members with `id` and
  /// `type` at the cuts given for `id`, `origin` and `type`, in one copy into room made for it.
  private func writePlainInCutOrder(
    _ object: UnsafeBufferPointer<UInt8>,
    cuts: (id: UInt32, origin: UInt32, type: UInt32),
    id: Int,
    type typeBytes: UnsafeBufferPointer<UInt8>
  ) {
    let cutID = Int(cuts.id)
    let cutOrigin = Int(cuts.origin)
    let cutType = Int(cuts.type)
    var wroteMember = false
    appendInPlace(
      of: object,
      most: object.count + Self.envelopeKeysRoom + InPlaceMembers.integerRoom + typeBytes.count + 2,
      wroteMember: &wroteMember
    ) { members in
      members.put(UInt8(ascii: "{"))
      members.run(from: 1, to: cutID)
      members.key("id")
      members.integer(id)
      members.run(from: cutID, to: cutOrigin)
      members.run(from: cutOrigin, to: cutType)
      members.key("type")
      members.plainString(typeBytes)
      members.run(from: cutType, to: object.count)
      members.put(UInt8(ascii: "}"))
    }
  }

  /// Writes the envelope of ``writeEnvelope(_:id:type:origin:)`` when its payload's members are in key order
  /// with the cuts where `id`, `origin` and `type` go (``EncodedMembers/envelopeCuts``): the runs of members
  /// between the cuts, copied, with the envelope's own members between them. Each part is copied once into
  /// room made for it (``appendInPlace(of:most:wroteMember:_:)``): all of them at once in the usual case (no
  /// origin, a type with no escape); otherwise the origin goes through `encodeValue` and an escaped type
  /// through `write(_:)`, with the parts around them in place.
  private func writeInKeyOrder(
    _ object: [UInt8],
    cuts: (id: UInt32, origin: UInt32, type: UInt32),
    id: Int,
    type: String,
    origin: (any Encodable)?
  ) throws {
    let cutID = Int(cuts.id)
    let cutOrigin = Int(cuts.origin)
    let cutType = Int(cuts.type)
    var typeBytes = type
    try typeBytes.withUTF8 { typeBytes in
      let plainType = Self.needsNoEscape(typeBytes)
      try object.withUnsafeBufferPointer { object in
        if origin == nil, plainType {
          writePlainInCutOrder(object, cuts: cuts, id: id, type: typeBytes)
          return
        }
        // The runs with the commas between the parts take at most the object's bytes (each run leaves out
        // the separator after it); then the envelope's keys and the values.
        let keys = Self.envelopeKeysRoom
        var wroteMember = false
        appendInPlace(of: object, most: object.count + keys + InPlaceMembers.integerRoom, wroteMember: &wroteMember) {
          members in
          members.put(UInt8(ascii: "{"))
          members.run(from: 1, to: cutID)
          members.key("id")
          members.integer(id)
          members.run(from: cutID, to: cutOrigin)
          if origin != nil { members.key("origin") }
        }
        if let origin { try encodeValue(origin, key: JSONIndexKey(stringValue: "origin")) }
        appendInPlace(of: object, most: object.count + keys + typeBytes.count + 2, wroteMember: &wroteMember) {
          members in
          members.run(from: cutOrigin, to: cutType)
          members.key("type")
          if plainType { members.plainString(typeBytes) }
        }
        if !plainType { write(type) }
        appendInPlace(of: object, most: object.count + 1, wroteMember: &wroteMember) { members in
          members.run(from: cutType, to: object.count)
          members.put(UInt8(ascii: "}"))
        }
      }
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
    if let cuts = encoded.envelopeCuts {
      try writeInKeyOrder(object, cuts: cuts, id: id, type: type, origin: origin)
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
