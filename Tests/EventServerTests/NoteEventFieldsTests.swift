import EventProtocol
import Foundation
import JSONCoding
import SampleApps
import Testing

// The sample board's events write and read their own fields (JSONFieldsCodable): the same bytes, values and
// errors as their Codable path, and an unknown type refused alike.

@Suite("NoteEvent: its own fields against Codable")
struct NoteEventFieldsTests {
  @Test(
    "notes and pings: Codable's bytes, values and errors",
    arguments: ["", "hello", "a \"quoted\" / line\n", "é€😀"]
  )
  func parity(text: String) {
    // The payload reads its envelope's `type`: the checker adds it beside the fields.
    #expect(JSONFieldsParity.differences(NoteEvent.note(text: text), beside: ["type": "note"]) == [])
    #expect(JSONFieldsParity.differences(NoteEvent.ping, beside: ["type": "ping"]) == [])
  }

  @Test("an envelope's type picks the case, through the fields as through Codable")
  func envelopes() throws {
    let reply = EventsReply<NoteEvent>(
      events: [
        EventEnvelope(id: 1, body: .payload(.note(text: "hi"))), EventEnvelope(id: 2, body: .payload(.ping)),
      ],
      queueID: "q"
    )
    let bytes = try WireFormat.encodeBytes(reply)
    #expect(try WireFormat.decode(EventsReply<NoteEvent>.self, from: bytes) == reply)
    #expect(try JSONDecoder().decode(EventsReply<NoteEvent>.self, from: Data(bytes)) == reply)
  }

  @Test("an unknown type is the same error both ways")
  func unknownType() {
    let document = Array(#"{"type":"nope","text":"x"}"#.utf8)
    let fields = Result { try WireJSON.decode(NoteEvent.self, from: document) }
    let codable = Result { try JSONDecoder().decode(NoteEvent.self, from: Data(document)) }
    guard case .failure(DecodingError.dataCorrupted(let ours)) = fields,
      case .failure(DecodingError.dataCorrupted(let theirs)) = codable
    else {
      Issue.record("expected two dataCorrupted errors: \(fields), \(codable)")
      return
    }
    #expect(ours.codingPath.map(\.stringValue) == theirs.codingPath.map(\.stringValue))
    #expect(ours.debugDescription == theirs.debugDescription)
  }
}
