import EventProtocol
import Foundation
import Testing

/// A payload that knows none of the fixtures' event types, as the engine knows none of Zulip's.
private struct OwnEvent: EventPayload {
  static let knownEventTypes: Set<String> = ["own"]
  var eventType: String { "own" }
  var value: Int
}

/// A snapshot with one field, flattened beside the registration's fields as Zulip's are.
private struct CountSnapshot: Codable, Sendable, Equatable {
  var count: Int
}

private func fixture(_ name: String) throws -> Data {
  let url = try #require(Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Fixtures"))
  return try Data(contentsOf: url)
}

private func jsonObject(_ data: Data) throws -> NSDictionary {
  try #require(try JSONSerialization.jsonObject(with: data) as? NSDictionary)
}

@Suite("Zulip-shaped wire format")
struct WireFixtureTests {
  @Test("the minimal register reply decodes; clients treat old-style queue ids as opaque")
  func registerMinimal() throws {
    let registration = try WireFormat.decode(Registration<EmptySnapshot>.self, from: fixture("register-success"))
    #expect(
      registration == Registration(queueID: "1514938867:1", lastEventID: -1, longPollTimeout: nil, snapshot: .init())
    )
    #expect(registration.finger == EventFinger(queueID: "1514938867:1", lastEventID: -1))
  }

  @Test("a UUID register reply with a long-poll timeout decodes, and ours encodes to the same shape")
  func registerUUIDRoundTrip() throws {
    let body = try fixture("register-success-uuid")
    let registration = try WireFormat.decode(Registration<EmptySnapshot>.self, from: body)
    #expect(
      registration
        == Registration(
          queueID: "fb67bf8a-c031-47cc-84cf-ed80accacda8",
          lastEventID: 6,
          longPollTimeout: .seconds(90),
          snapshot: .init()
        )
    )
    let ours = try jsonObject(WireFormat.encode(registration))
    let theirs = try jsonObject(body).mutableCopy() as! NSMutableDictionary
    theirs.removeObjects(forKeys: ["zulip_feature_level", "zulip_version"])
    #expect(ours == theirs)
  }

  @Test("snapshot fields sit beside the registration's fields and round-trip")
  func registerWithSnapshot() throws {
    let registration = Registration(
      queueID: "q",
      lastEventID: -1,
      longPollTimeout: .seconds(90),
      snapshot: CountSnapshot(count: 4)
    )
    let encoded = try WireFormat.encode(registration)
    #expect(try jsonObject(encoded)["count"] as? Int == 4)
    #expect(try WireFormat.decode(Registration<CountSnapshot>.self, from: encoded) == registration)
  }

  @Test("unknown event types do not break the batch; the heartbeat decodes")
  func eventsWithUnknownTypes() throws {
    let reply = try WireFormat.decode(EventsReply<OwnEvent>.self, from: fixture("events-success"))
    #expect(
      reply
        == EventsReply(
          events: [
            EventEnvelope(id: 0, body: .unknown(type: "alert_words")),
            EventEnvelope(id: 1, body: .unknown(type: "update_display_settings")),
            EventEnvelope(id: 2, body: .heartbeat),
          ],
          queueID: "fb67bf8a-c031-47cc-84cf-ed80accacda8"
        )
    )
  }

  @Test("our events encode as Zulip's: id and type beside the payload's fields")
  func eventsEncodeZulipShape() throws {
    let reply = EventsReply<OwnEvent>(
      events: [EventEnvelope(id: 3, body: .payload(OwnEvent(value: 9))), EventEnvelope(id: 4, body: .heartbeat)],
      queueID: "q"
    )
    let encoded = try WireFormat.encode(reply)
    let expected =
      #"{"events":[{"id":3,"type":"own","value":9},{"id":4,"type":"heartbeat"}],"msg":"","queue_id":"q","result":"success"}"#
    #expect(String(decoding: encoded, as: UTF8.self) == expected)
    #expect(try WireFormat.decode(EventsReply<OwnEvent>.self, from: encoded) == reply)
  }

  @Test("an empty dont_block reply decodes, and ours encodes to the same shape")
  func emptyDontBlock() throws {
    let body = try fixture("events-empty-dont-block")
    let reply = try WireFormat.decode(EventsReply<OwnEvent>.self, from: body)
    #expect(reply == EventsReply(events: [], queueID: nil))
    #expect(try jsonObject(WireFormat.encode(reply)) == jsonObject(body))
  }

  @Test(
    "error bodies decode to typed errors matched on code, and ours encode to the same shape",
    arguments: [
      ("error-bad-event-queue-id", EventAPIError.badEventQueueID("fb67bf8a-c031-47cc-84cf-ed80accacda8")),
      ("error-already-pruned", EventAPIError.alreadyPruned(lastEventID: 105)),
      ("error-not-in-queue", EventAPIError.notInQueue(lastEventID: 7)),
    ]
  )
  func errors(name: String, expected: EventAPIError) throws {
    let body = try fixture(name)
    #expect(throws: expected) { try WireFormat.decode(EventsReply<OwnEvent>.self, from: body) }
    #expect(try jsonObject(WireFormat.encode(expected)) == jsonObject(body))
  }

  @Test("the rate-limit error carries its retry-after")
  func rateLimit() throws {
    let body = try fixture("error-rate-limit")
    do throws(EventAPIError) {
      _ = try WireFormat.decode(EventsReply<OwnEvent>.self, from: body)
      Issue.record("a rate-limit body decoded as a success")
    } catch {
      #expect(error.code == .rateLimitHit)
      #expect(error.retryAfter == .nanoseconds(28_706_807_374))
    }
  }

  @Test("a refusal of credentials carries its reason both ways; a body without one decodes with none")
  func unauthorizedReason() throws {
    let body = #"{"result":"error","code":"UNAUTHORIZED","reason":"TOKEN_EXPIRED","msg":"the token expired"}"#
    let expected = EventAPIError.unauthorized("the token expired", reason: "TOKEN_EXPIRED")
    #expect(throws: expected) { try WireFormat.decode(EventsReply<OwnEvent>.self, from: Data(body.utf8)) }
    #expect(try jsonObject(WireFormat.encode(expected)) == jsonObject(Data(body.utf8)))
    let plain = #"{"result":"error","code":"UNAUTHORIZED","msg":"Invalid API key"}"#
    #expect(throws: EventAPIError.unauthorized()) {
      try WireFormat.decode(EventsReply<OwnEvent>.self, from: Data(plain.utf8))
    }
    #expect(expected.code == .unauthorized && expected.code.meansGiveUp)
  }

  @Test(
    "malformed bodies are a typed malformedResponse error",
    arguments: [
      #"{"result": "success", "events": [{"id": 1}]}"#,
      #"{"result": "success", "events": [{"id": 1, "type": "own"}]}"#,
      #"{"result": "maybe"}"#,
      #"not json"#,
      #"{"result": "error"}"#,
    ]
  )
  func malformed(body: String) {
    #expect {
      _ = try WireFormat.decode(EventsReply<OwnEvent>.self, from: Data(body.utf8))
    } throws: { error in
      (error as? EventAPIError)?.code == .malformedResponse
    }
  }

  @Test("an oversize body is refused before parsing")
  func oversize() {
    let body = Data(repeating: UInt8(ascii: " "), count: WireFormat.maximumBodySize + 1)
    #expect {
      _ = try WireFormat.decode(EventsReply<OwnEvent>.self, from: body)
    } throws: { error in
      (error as? EventAPIError)?.code == .malformedResponse
    }
  }

  @Test("unknown error codes are kept as they are")
  func unknownErrorCode() throws {
    let body = Data(#"{"result": "error", "code": "INVALID_API_KEY", "msg": "no"}"#.utf8)
    #expect(throws: EventAPIError(code: .init(wireValue: "INVALID_API_KEY"), message: "no")) {
      _ = try WireFormat.decode(EventsReply<OwnEvent>.self, from: body)
    }
  }
}

@Suite("Mutation wire format")
struct MutationWireTests {
  @Test("a receipt encodes its queues as an object keyed by queue id, and round-trips")
  func receiptShape() throws {
    let receipt = MutationReceipt(applied: true, eventsThrough: ["q1": 12, "q2": -1])
    let encoded = try WireFormat.encode(receipt)
    #expect(String(decoding: encoded, as: UTF8.self) == #"{"applied":true,"events_through":{"q1":12,"q2":-1}}"#)
    #expect(try JSONDecoder().decode(MutationReceipt.self, from: encoded) == receipt)
  }

  @Test("a receipt says whether a finger has seen the mutation's effect")
  func receiptReflection() {
    let receipt = MutationReceipt(applied: true, eventsThrough: ["q1": 12])
    #expect(!receipt.isReflected(by: EventFinger(queueID: "q1", lastEventID: 11)))
    #expect(receipt.isReflected(by: EventFinger(queueID: "q1", lastEventID: 12)))
    #expect(receipt.isReflected(by: EventFinger(queueID: "registered-later", lastEventID: -1)))
  }

  @Test("a mutation request uses snake_case keys")
  func requestShape() throws {
    let request = MutationRequest(clientID: ClientID(rawValue: "c"), mutationID: MutationID(7), mutation: "hello")
    #expect(
      String(decoding: try WireFormat.encode(request), as: UTF8.self)
        == #"{"client_id":"c","mutation":"hello","mutation_id":7}"#
    )
  }
}

/// A multi-case event written with ``TaggedEventPayload``.
private struct TodoAdded: Codable, Sendable, Equatable {
  var todoID: String
  var title: String
}

private struct TodoDone: Codable, Sendable, Equatable {
  var todoID: String
}

private enum TodoEvent: TaggedEventPayload {
  case added(TodoAdded)
  case done(TodoDone)

  static let knownEventTypes: Set<String> = ["todo_added", "todo_done"]

  var eventType: String {
    switch self {
    case .added: "todo_added"
    case .done: "todo_done"
    }
  }

  var fields: any Encodable & Sendable {
    switch self {
    case .added(let fields): fields
    case .done(let fields): fields
    }
  }

  init(type: String, from decoder: any Decoder) throws {
    switch type {
    case "todo_added": self = .added(try TodoAdded(from: decoder))
    default: self = .done(try TodoDone(from: decoder))
    }
  }
}

/// The same event in the short form: one line of cases instead of three switches.
private enum ShortTodoEvent: TaggedEventPayload {
  case added(TodoAdded)
  case done(TodoDone)

  static let cases = [EventCase("todo_added", Self.added), EventCase("todo_done", Self.done)]
}

@Suite("Wire format: events with several cases, origins, ordering, duplicate keys")
struct WireShapeTests {
  @Test("the short form (EventCase) writes and reads the same bytes as the three switches")
  func shortForm() throws {
    let long = EventsReply<TodoEvent>(
      events: [
        EventEnvelope(id: 0, body: .payload(.added(TodoAdded(todoID: "t1", title: "Milk")))),
        EventEnvelope(id: 1, body: .payload(.done(TodoDone(todoID: "t1")))),
      ],
      queueID: "q"
    )
    let short = EventsReply<ShortTodoEvent>(
      events: [
        EventEnvelope(id: 0, body: .payload(.added(TodoAdded(todoID: "t1", title: "Milk")))),
        EventEnvelope(id: 1, body: .payload(.done(TodoDone(todoID: "t1")))),
      ],
      queueID: "q"
    )
    #expect(try WireFormat.encode(short) == WireFormat.encode(long))
    #expect(try WireFormat.decode(EventsReply<ShortTodoEvent>.self, from: WireFormat.encode(long)) == short)
    #expect(ShortTodoEvent.knownEventTypes == TodoEvent.knownEventTypes)
    #expect(ShortTodoEvent.done(TodoDone(todoID: "x")).eventType == "todo_done")
    // A type it does not know is an unknown event, not a crash.
    let unknown = #"{"result":"success","msg":"","events":[{"id":2,"type":"todo_renamed","todoID":"t1"}]}"#
    let decoded = try WireFormat.decode(EventsReply<ShortTodoEvent>.self, from: Data(unknown.utf8))
    #expect(decoded.events.first?.body == .unknown(type: "todo_renamed"))
  }

  @Test("a tagged multi-case event puts its fields beside id and type, and reads back")
  func taggedEvents() throws {
    let reply = EventsReply<TodoEvent>(
      events: [
        EventEnvelope(id: 0, body: .payload(.added(TodoAdded(todoID: "t1", title: "Milk")))),
        EventEnvelope(id: 1, body: .payload(.done(TodoDone(todoID: "t1")))),
      ],
      queueID: "q"
    )
    let body = try WireFormat.encode(reply)
    let text = String(decoding: body, as: UTF8.self)
    #expect(text.contains(#"{"id":0,"title":"Milk","todoID":"t1","type":"todo_added"}"#))
    #expect(text.contains(#"{"id":1,"todoID":"t1","type":"todo_done"}"#))
    #expect(try WireFormat.decode(EventsReply<TodoEvent>.self, from: body) == reply)
  }

  @Test("an event's origin is a nested object on the wire, and absent when there is none")
  func originOnTheWire() throws {
    let origin = MutationOrigin(clientID: "phone", mutationID: MutationID(7))
    let reply = EventsReply<TodoEvent>(
      events: [EventEnvelope(id: 3, body: .payload(.done(TodoDone(todoID: "t"))), origin: origin)],
      queueID: nil
    )
    let text = String(decoding: try WireFormat.encode(reply), as: UTF8.self)
    #expect(text.contains(#""origin":{"client_id":"phone","mutation_id":7}"#))
    #expect(try WireFormat.decode(EventsReply<TodoEvent>.self, from: Data(text.utf8)).events[0].origin == origin)
  }

  @Test("a reply whose event ids do not strictly increase is a malformed response")
  func outOfOrderRefused() {
    let body = #"{"result": "success", "msg": "", "events": [{"id": 2, "type": "x"}, {"id": 1, "type": "x"}]}"#
    #expect(throws: EventAPIError.self) {
      _ = try WireFormat.decode(EventsReply<TodoEvent>.self, from: Data(body.utf8))
    }
    do {
      _ = try WireFormat.decode(EventsReply<TodoEvent>.self, from: Data(body.utf8))
    } catch {
      #expect(error.code == .malformedResponse)
    }
  }

  @Test("when a JSON object repeats a key, the first value is the one decoded")
  func duplicateKeysFirstWins() throws {
    let body = #"{"result": "success", "msg": "", "queue_id": "first", "queue_id": "second", "events": []}"#
    #expect(try WireFormat.decode(EventsReply<TodoEvent>.self, from: Data(body.utf8)).queueID == "first")
  }

  @Test("MUTATION_ID_REUSED round-trips as its own code")
  func reusedCode() throws {
    let body = try WireFormat.encode(EventAPIError.mutationIDReused(MutationID(3)))
    #expect(throws: EventAPIError.mutationIDReused(MutationID(3))) {
      _ = try WireFormat.decode(EventsReply<TodoEvent>.self, from: body)
    }
  }
}
