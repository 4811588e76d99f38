/// The members of a JSON object encoded once, to be written again verbatim into other objects.
///
/// The server measures each event against its size limit by encoding it; keeping those bytes lets every
/// answer that carries the event copy them instead of running the payload's `encode(to:)` again (the issue's
/// "the size check must stop encoding each event a second time"). Nested objects are written with sorted
/// keys and the top-level members are registered for the sort of the object they are spliced into
/// (``JSONOutput/splice(_:at:serial:)``), so that object comes out exactly as if the value had been encoded
/// in place.
@usableFromInline package struct EncodedMembers: Sendable {
  /// The whole object, braces included: one allocation per event, as the size check's bytes always were.
  package let object: [UInt8]
  /// Where an envelope's own members go among these (byte offsets into ``object``: the start of the first
  /// member whose key sorts after `id`, `origin` and `type`, or `object.count`), when the members are in key
  /// order, without escapes, repeats or an envelope key: an answer then writes the envelope in four copies
  /// (``JSONOutput/writeEnvelope(_:id:type:origin:)``). `nil` otherwise, and the members are merged one by one.
  let envelopeCuts: (id: UInt32, origin: UInt32, type: UInt32)?

  private init(object: [UInt8], envelopeCuts: (id: UInt32, origin: UInt32, type: UInt32)? = nil) {
    self.object = object
    self.envelopeCuts = envelopeCuts
  }

  /// Whether the object has no members.
  var isEmpty: Bool { object.count <= 2 }

  /// The bytes of the members alone, with the commas between them and without the braces.
  var members: ArraySlice<UInt8> { object[1..<(object.count - 1)] }

  /// The size of the envelope these members travel in, at its largest without an origin:
  /// `{members,"id":9223372036854775807,"type":"eventType"}`, as the server's size limit counts it.
  package func envelopeSize(eventType: String) -> Int {
    let separator = isEmpty ? 0 : 1
    // `"id":` and Int.max's 19 digits, a comma, `"type":`.
    return object.count + separator + 24 + 1 + 7 + JSONOutput.quotedLength(of: eventType)
  }

  /// Encodes `value` and keeps its members: the keys of every nested object sorted, the members themselves in
  /// the order `value` wrote them (an object they are spliced into sorts them with its own).
  /// - Returns: `nil` when `value` does not encode as a JSON object (an array or a single value cannot be
  ///   spliced into one).
  /// - Throws: What encoding `value` throws.
  package static func encoding<Value: Encodable>(_ value: Value) throws -> EncodedMembers? {
    // The bytes stay with the event until every queue has acknowledged it: start small (an event's payload
    // is usually a few dozen bytes) rather than at the coder's default 256, which each pending event kept.
    let output = JSONOutput(sortsKeys: true, leavesTopLevelUnsorted: true, capacity: 64)
    try output.encodeValue(value, key: nil, fields: true)
    let object = output.bytes
    guard object.count >= 2, object.first == UInt8(ascii: "{"), object.last == UInt8(ascii: "}") else { return nil }
    return EncodedMembers(object: object).inKeyOrder()
  }

  /// These members in key order, with the envelope's cuts found; `self` when a key has an escape, a key is
  /// repeated or is one of the envelope's (the members are then merged one by one, as before).
  ///
  /// The order of an object's members is not part of its value: a sorted output sorts them where they are
  /// spliced, and an unsorted one (records) is read by key.
  private func inKeyOrder() -> EncodedMembers {
    var members: [(start: Int, end: Int, keyEnd: Int)] = []
    members.reserveCapacity(8)
    let (sorted, escaped) = findMembers(into: &members)
    if escaped { return self }
    return object.withUnsafeBufferPointer { object in
      func key(_ member: (start: Int, end: Int, keyEnd: Int)) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: object[(member.start + 1)..<member.keyEnd])
      }
      if !sorted {
        // Insertion sort, stable (a repeated key keeps its order, and is refused below); payloads have few
        // members.
        for unsorted in members.indices.dropFirst() {
          let member = members[unsorted]
          var place = unsorted
          while place > 0, key(member).lexicographicallyPrecedes(key(members[place - 1])) {
            members[place] = members[place - 1]
            place -= 1
          }
          members[place] = member
        }
      }
      var ordered: [UInt8] = []
      ordered.reserveCapacity(object.count)
      ordered.append(UInt8(ascii: "{"))
      // The cut before the first key after each envelope key (`id`, `origin`, `type`), as it is passed.
      var cuts: (UInt32, UInt32, UInt32) = (0, 0, 0)
      var cutCount = 0
      func addCut(_ offset: Int) {
        switch cutCount {
        case 0: cuts.0 = UInt32(offset)
        case 1: cuts.1 = UInt32(offset)
        default: cuts.2 = UInt32(offset)
        }
        cutCount += 1
      }
      for (position, member) in members.enumerated() {
        let memberKey = key(member)
        if position > 0, key(members[position - 1]).elementsEqual(memberKey) { return self }
        while cutCount < 3, Self.envelopeKeys[cutCount].lexicographicallyPrecedes(memberKey) {
          // Where this member starts: past the comma it is about to get.
          addCut(ordered.count + (position > 0 ? 1 : 0))
        }
        if cutCount < 3, Self.envelopeKeys[cutCount].elementsEqual(memberKey) { return self }
        if position > 0 { ordered.append(UInt8(ascii: ",")) }
        ordered.append(contentsOf: UnsafeBufferPointer(rebasing: object[member.start..<member.end]))
      }
      ordered.append(UInt8(ascii: "}"))
      while cutCount < 3 { addCut(ordered.count) }
      return EncodedMembers(object: ordered, envelopeCuts: cuts)
    }
  }

  /// The envelope's own keys, in order.
  private static let envelopeKeys: [[UInt8]] = [Array("id".utf8), Array("origin".utf8), Array("type".utf8)]

  /// Where each top-level member of ``object`` starts (its key's opening quote), where its key ends (the
  /// closing quote) and where the member ends (the comma or closing brace after it), found in one pass: the
  /// object is JSON as ``JSONOutput`` writes it (no whitespace), so a comma outside strings at the object's
  /// own level is what separates members.
  /// - Parameter members: Emptied, then filled in order.
  /// - Returns: Whether the keys, compared as written, are in order, and whether any has an escape.
  package func findMembers(into members: inout [(start: Int, end: Int, keyEnd: Int)]) -> (sorted: Bool, escaped: Bool) {
    members.removeAll(keepingCapacity: true)
    guard !isEmpty else { return (true, false) }
    return object.withUnsafeBufferPointer { object in
      let end = object.count - 1
      var sorted = true
      var escaped = false
      var index = 1
      while true {
        let start = index
        index += 1
        while object[index] != UInt8(ascii: "\"") {
          if object[index] == UInt8(ascii: "\\") {
            escaped = true
            index += 1
          }
          index += 1
        }
        let keyEnd = index
        if sorted, let last = members.last {
          let previous = UnsafeBufferPointer(rebasing: object[(last.start + 1)..<last.keyEnd])
          sorted = !UnsafeBufferPointer(rebasing: object[(start + 1)..<keyEnd]).lexicographicallyPrecedes(previous)
        }
        // Past the colon and the value, to the comma or the closing brace at this level.
        var depth = 0
        var inString = false
        index += 2
        while index < end {
          let byte = object[index]
          if inString {
            if byte == UInt8(ascii: "\\") {
              index += 1
            } else if byte == UInt8(ascii: "\"") {
              inString = false
            }
          } else if byte == UInt8(ascii: "\"") {
            inString = true
          } else if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") {
            depth += 1
          } else if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") {
            depth -= 1
          } else if byte == UInt8(ascii: ","), depth == 0 {
            break
          }
          index += 1
        }
        members.append((start, index, keyEnd))
        if index >= end { return (sorted, escaped) }
        index += 1
      }
    }
  }
}

extension JSONOutput {
  /// Writes `encoded`'s members into the object `serial` at `depth`, as if each had been encoded there: each
  /// is registered for the object's key sort.
  package func splice(_ encoded: EncodedMembers, at depth: Int, serial: UInt32) throws {
    guard !encoded.isEmpty else { return }
    let shift = try beginSplice(at: depth, serial: serial)
    bytes.append(contentsOf: encoded.members)
    var members = mergingMembers
    mergingMembers = []
    defer { mergingMembers = members }
    _ = encoded.findMembers(into: &members)
    for member in members { registerMember(at: shift + member.start) }
    endSplice(at: depth, count: members.count)
  }
}

extension JSONValueEncoder {
  /// Makes this value an object and writes `encoded`'s members into it (see ``JSONOutput/splice(_:at:serial:)``).
  package func splice(_ encoded: EncodedMembers) throws {
    try output.splice(encoded, at: depth, serial: output.beginObject(at: depth))
  }
}
