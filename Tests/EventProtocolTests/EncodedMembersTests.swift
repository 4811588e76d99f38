import EventProtocol
import Foundation
import JSONCoding
import JSONTestSupport
import TestScheduling
import Testing

/// An event whose fields are a ``Sample``'s, beside the envelope's `id`, `type` and `origin`: the envelope's
/// keys sort in among them.
private struct SampleEvent: EventPayload {
  static let knownEventTypes: Set<String> = ["sample"]
  /// Not encoded by the payload (the envelope writes it): any string, to measure its escapes.
  var eventType: String
  var sample: Sample

  init(sample: Sample, eventType: String = "sample") {
    self.sample = sample
    self.eventType = eventType
  }
  init(from decoder: any Decoder) throws {
    sample = try Sample(from: decoder)
    eventType = "sample"
  }
  func encode(to encoder: any Encoder) throws { try sample.encode(to: encoder) }
}

/// An event that encodes as a single string: not an object, so it cannot be spliced.
private struct Shout: EventPayload {
  static let knownEventTypes: Set<String> = ["shout"]
  var eventType: String { "shout" }
  var text: String
  init(text: String) { self.text = text }
  init(from decoder: any Decoder) throws { text = try decoder.singleValueContainer().decode(String.self) }
  func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(text)
  }
}

/// An event whose top-level members are any keys at all: some sort before, between and after the envelope's
/// `id`, `origin` and `type`, some have escapes, some are those very keys.
private struct KeyedEvent: EventPayload {
  static let knownEventTypes: Set<String> = ["keyed"]
  var eventType: String { "keyed" }
  var fields: [String: Int]
  init(fields: [String: Int]) { self.fields = fields }
  init(from decoder: any Decoder) throws { fields = try [String: Int](from: decoder) }
  func encode(to encoder: any Encoder) throws { try fields.encode(to: encoder) }
}

// Property tests of the encoded members the server keeps for each event (its size check's encoding) and
// splices into every answer: the bytes are the ones encoding the payload in place writes, and Foundation's.
@Suite("EncodedMembers: a payload encoded once and spliced into envelopes")
struct EncodedMembersTests {
  @Test(
    "a spliced envelope encodes to the same bytes as encoding in place, and Foundation's",
    .cpuBound,
    arguments: 0..<200
  )
  func splicedEqualsEncoded(seed: UInt64) throws {
    var draw = Draw(seed: seed)
    // Any type at all, some needing escapes; ids of every length.
    let payload = SampleEvent(sample: Sample(&draw), eventType: draw.chance(70) ? "sample" : draw.string())
    let origin =
      draw.chance(50)
      ? MutationOrigin(clientID: ClientID(rawValue: draw.key()), mutationID: MutationID(rawValue: 7)) : nil
    let id = draw.chance(90) ? draw.int(0...1_000_000) : Int.max - draw.int(1...1_000)
    let plain = EventEnvelope(id: id, body: .payload(payload), origin: origin)
    var spliced = plain
    let encoded = try #require(try EncodedMembers.encoding(payload))
    spliced.encodedPayload = encoded
    var next = plain
    next.id += 1
    var splicedNext = spliced
    splicedNext.id += 1
    // The second without an origin: an origin in one envelope must not leak into the next.
    next.origin = nil
    splicedNext.origin = nil
    let reply = EventsReply(events: [plain, next], queueID: nil)
    let splicedReply = EventsReply(events: [spliced, splicedNext], queueID: nil)

    let ours = try WireJSON.encode(splicedReply)
    #expect(ours == (try WireJSON.encode(reply)), "seed \(seed)")
    #expect(ours == (try foundationSorted(reply)), "seed \(seed)")
    // Read back (only the type `SampleEvent` knows decodes to it).
    guard payload.eventType == "sample" else { return }
    #expect(try WireJSON.decode(EventsReply<SampleEvent>.self, from: ours) == reply)
    // Unsorted output (records, snapshots) holds the same values.
    let unsorted = try WireJSON.encode(splicedReply, sortedKeys: false)
    #expect(try JSONDecoder().decode(EventsReply<SampleEvent>.self, from: Data(unsorted)) == reply)
  }

  @Test("an envelope's keys merged among its payload's: the bytes sorting them writes", .cpuBound, arguments: 0..<300)
  func mergedKeys(seed: UInt64) throws {
    var draw = Draw(seed: seed)
    let reserved = ["id", "origin", "type"]
    let near = ["", "a", "i", "ia", "id0", "ie", "o", "origin_", "p", "t", "typ", "types", "z", "_", "I", "é"]
    var fields: [String: Int] = [:]
    for _ in 0..<draw.int(0...7) {
      let key =
        switch draw.int(0...9) {
        case 0: reserved[draw.int(0...2)]
        case 1, 2: draw.key()
        default: near[draw.int(0...near.count - 1)]
        }
      fields[key] = draw.int(-5...5)
    }
    let payload = KeyedEvent(fields: fields)
    let origin =
      draw.chance(50)
      ? MutationOrigin(clientID: ClientID(rawValue: draw.key()), mutationID: MutationID(rawValue: 2)) : nil
    let plain = EventEnvelope(id: draw.int(0...99), body: .payload(payload), origin: origin)
    var spliced = plain
    let encoded = try #require(try EncodedMembers.encoding(payload))
    spliced.encodedPayload = encoded
    let next = EventEnvelope<KeyedEvent>(id: plain.id + 1, body: .heartbeat)
    let ours = try WireJSON.encode(EventsReply(events: [spliced, next], queueID: nil))
    #expect(ours == (try WireJSON.encode(EventsReply(events: [plain, next], queueID: nil))), "seed \(seed)")
    // A payload key that is the envelope's own is replaced by the envelope's, as Foundation does.
    #expect(ours == (try foundationSorted(EventsReply(events: [plain, next], queueID: nil))), "seed \(seed)")
  }

  @Test(
    "the envelope size the server limits is the size of the envelope encoded in place",
    .cpuBound,
    arguments: 0..<200
  )
  func envelopeSize(seed: UInt64) throws {
    var draw = Draw(seed: seed)
    let payload = SampleEvent(sample: Sample(&draw), eventType: draw.string())
    let encoded = try #require(try EncodedMembers.encoding(payload))
    let envelope = try WireJSON.encode(EventEnvelope(id: Int.max, body: .payload(payload)), sortedKeys: false)
    #expect(encoded.envelopeSize(eventType: payload.eventType) == envelope.count, "seed \(seed)")
  }

  @Test("a payload that is not an object is not kept, and its envelope encodes as before")
  func notAnObject() throws {
    #expect(try EncodedMembers.encoding(Shout(text: "hi")) == nil)
  }

  @Test("changing an envelope's body drops its encoded payload; equality ignores it")
  func bodyChangeDropsEncoding() throws {
    var draw = Draw(seed: 1)
    let first = SampleEvent(sample: Sample(&draw))
    let second = SampleEvent(sample: Sample(&draw))
    var envelope = EventEnvelope(id: 1, body: .payload(first))
    envelope.encodedPayload = try EncodedMembers.encoding(first)
    #expect(envelope == EventEnvelope(id: 1, body: .payload(first)))
    envelope.body = .payload(second)
    #expect(envelope.encodedPayload == nil)
    #expect(try WireJSON.encode(envelope) == (try foundationSorted(EventEnvelope(id: 1, body: .payload(second)))))
  }
}
