import EventProtocol
import JSONCoding
import Testing

/// A payload as small as a payload gets.
private struct Tick: EventPayload {
  static let knownEventTypes: Set<String> = ["tick"]
  var eventType: String { "tick" }
  var count: UInt8
}

/// A payload larger than the envelope itself, with references and optionals inside.
private struct Wide: EventPayload {
  static let knownEventTypes: Set<String> = ["wide"]
  var eventType: String { "wide" }
  var title: String
  var tags: [String]
  var sizes: [Int: Double]
  var first: Int
  var second: Int?
  var third: (Double, Double, Double) { (0, 0, 0) }

  private enum CodingKeys: String, CodingKey { case title, tags, sizes, first, second }
}

/// A payload that is an enum with payloads of different sizes.
private enum Change: EventPayload {
  case renamed(String)
  case moved(from: Int, to: Int, at: Double)
  case cleared

  static let knownEventTypes: Set<String> = ["change"]
  var eventType: String { "change" }
}

/// An envelope keeps its body by reference, shared by its copies: what the server's answers rely on.
@Suite("EventEnvelope: a body shared by reference, with the layout of StoredEnvelope")
struct EventEnvelopeStorageTests {
  @Test("envelopes of any payload are laid out as StoredEnvelope, which a server writes answers through")
  func layoutMatches() {
    #expect(StoredEnvelope.hasEnvelopeLayout(Tick.self))
    #expect(StoredEnvelope.hasEnvelopeLayout(Wide.self))
    #expect(StoredEnvelope.hasEnvelopeLayout(Change.self))
    #expect(MemoryLayout<EventEnvelope<Wide>>.size == MemoryLayout<EventEnvelope<Tick>>.size)
  }

  @Test("an envelope written as a StoredEnvelope reads back as the envelope of that content")
  func writtenThroughStoredEnvelope() {
    let origin = MutationOrigin(clientID: "phone", mutationID: MutationID(7))
    let content = EventContentStorage.of(
      EventBody<Change>.payload(.moved(from: 1, to: 2, at: 0.5)),
      encodedPayload: nil
    )
    let envelopes = [EventEnvelope<Change>](unsafeUninitializedCapacity: 2) { buffer, count in
      buffer.withMemoryRebound(to: StoredEnvelope.self) { stored in
        stored.baseAddress!.initialize(to: StoredEnvelope(id: 41, storage: content, origin: nil))
        (stored.baseAddress! + 1).initialize(to: StoredEnvelope(id: 42, storage: content, origin: origin))
      }
      count = 2
    }
    #expect(
      envelopes == [
        EventEnvelope(id: 41, body: .payload(.moved(from: 1, to: 2, at: 0.5))),
        EventEnvelope(id: 42, body: .payload(.moved(from: 1, to: 2, at: 0.5)), origin: origin),
      ]
    )
    #expect(envelopes[0].storage === envelopes[1].storage)
  }

  @Test("every body reads back as it was made, through the payload's content or a marker's")
  func bodiesReadBack() throws {
    let bodies: [EventBody<Change>] = [
      .heartbeat, .restart, .unknown(type: "zulip_other"), .payload(.renamed("x")), .payload(.cleared),
      .payload(.moved(from: 1, to: 2, at: 0.5)),
    ]
    for body in bodies {
      let envelope = EventEnvelope(id: 1, body: body)
      #expect(envelope.body == body)
      #expect((envelope.storage is MarkerContent) == (body.type != "change"))
      var kept = EventEnvelope(
        id: 1,
        body: body,
        origin: nil,
        encodedPayload: try EncodedMembers.encoding(Tick(count: 1))
      )
      // Only a payload's members are kept.
      #expect((kept.encodedPayload != nil) == (body.type == "change"))
      kept.body = .heartbeat
      #expect(kept.body == .heartbeat && kept.encodedPayload == nil)
    }
    // Heartbeats and restarts share one content each.
    #expect(
      EventEnvelope<Change>(id: 1, body: .heartbeat).storage === EventEnvelope<Tick>(id: 9, body: .heartbeat).storage
    )
  }

  @Test("changing the body drops the kept encoding and leaves the other copies as they were")
  func changingTheBody() throws {
    let encoded = try EncodedMembers.encoding(Tick(count: 1))
    let original = EventEnvelope<Tick>(id: 3, body: .payload(Tick(count: 1)), origin: nil, encodedPayload: encoded)
    var changed = original
    #expect(changed.storage === original.storage)
    changed.body = .payload(Tick(count: 2))
    #expect(changed.encodedPayload == nil)
    #expect(original.encodedPayload != nil)
    #expect(original.body == .payload(Tick(count: 1)))
    #expect(changed != original)
    changed.body = .payload(Tick(count: 1))
    #expect(changed == original, "equal by value, whatever the encoding kept and the storage")
  }
}
