import Foundation

/// Decodes the elements of one array of a document as the parser reaches each of them, so that the tape
/// never holds them all: a poll's answer of 100,000 events made 14 MB of tape entries, each page of them
/// touched for the first time (a fault per 4 KiB) and read once.
///
/// The array is the value of the root object's member ``member`` (its first occurrence whose value is an
/// array). Each element is parsed alone onto a tape of its own, which the next element reuses, and handed
/// to ``decodeElement(_:)``. The document is still parsed whole before any of it is decoded otherwise, so a
/// syntax error anywhere is reported before an element's decoding error, as without streaming. The array's
/// entry on the document's tape has no children (``JSONTape/Entry/isStreamed``): what decodes the member
/// takes the elements from the streamer, and any other reading of it is a decoding error.
package protocol JSONArrayStreamer: AnyObject {
  /// The key of the root object's member whose array is streamed.
  var member: any CodingKey { get }

  /// Decodes one element. `decoder` is on it, with the coding path `[member, index]`; its tape holds
  /// this element and some before it, and is reused for the elements after it, so nothing may keep it or
  /// its entries.
  /// - Returns: Whether to decode the elements after this one (`false` once one failed: the rest are then
  ///   only parsed).
  func decodeElement(_ decoder: JSONTapeDecoder) -> Bool
}

/// The member a parser streams and the tape its elements are parsed onto.
struct StreamedMember {
  let streamer: any JSONArrayStreamer
  /// The member's name, to compare keys with.
  let name: [UInt8]
  let elements: JSONTape

  init(streamer: any JSONArrayStreamer, elements: JSONTape) {
    self.streamer = streamer
    self.name = Array(streamer.member.stringValue.utf8)
    self.elements = elements
  }
}

extension JSONTape {
  /// The error for a streamed array read other than through its streamer.
  package func streamedArrayRead(path: [any CodingKey]) -> DecodingError {
    .dataCorrupted(
      .init(codingPath: path, debugDescription: "an array decoded as it was parsed cannot be read again")
    )
  }
}

extension JSONTape.Parser {
  /// Whether `key` (the key just parsed) names the member to stream.
  func streams(key: JSONTape.Entry) -> Bool {
    guard let stream, !key.flag, Int(key.end - key.start) == stream.name.count else { return false }
    return stream.name.withUnsafeBufferPointer { name in
      name.isEmpty || memcmp(name.baseAddress!, bytes.baseAddress! + Int(key.start), name.count) == 0
    }
  }

  /// The streamed member's array, from its opening bracket: its entry, without children, then each element
  /// parsed alone and handed to the streamer.
  mutating func parseStreamedArray(into entries: inout [JSONTape.Entry]) throws(JSONTapeError) {
    let stream = self.stream!
    self.stream = nil
    let elements = stream.elements
    let index = entries.count
    entries.append(JSONTape.Entry(kind: .array, flag: true, start: UInt32(position), end: 0, next: 0, count: 0))
    position += 1
    try skipWhitespace()
    var count: UInt32 = 0
    var decoding = true
    elements.path = [stream.streamer.member, JSONIndexKey(intValue: 0)]
    if bytes[position] != UInt8(ascii: "]") {
      while true {
        // Elements follow each other on their tape until it holds a few thousand entries, then it starts
        // again from the first: emptying it for each cost more than the rest of a small element's parse.
        if elements.entries.count > 4096 {
          elements.entries.removeAll(keepingCapacity: true)
          if !elements.memberTables.isEmpty { elements.memberTables.removeAll() }
        }
        let element = UInt32(elements.entries.count)
        // The root object is at depth 0 and the array at 1, as `parseContainer` would have them.
        try parseValue(into: &elements.entries, depth: 2)
        if decoding {
          if elements.path.count > 2 { elements.path.removeSubrange(2...) }
          elements.path[1] = JSONIndexKey(intValue: Int(count))
          decoding = stream.streamer.decodeElement(JSONTapeDecoder(tape: elements, index: element, depth: 2))
        }
        guard try moreValues(after: &count, closedBy: UInt8(ascii: "]")) else { break }
      }
    }
    position += 1
    entries[index].count = count
    entries[index].end = UInt32(position)
    entries[index].next = UInt32(entries.count)
  }
}
