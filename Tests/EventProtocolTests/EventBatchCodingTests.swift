import Foundation
import JSONCoding
import JSONTestSupport
import TestScheduling
import Testing

@testable import EventProtocol

/// A reply decoded as the member `r` of an object: through `decode(_:forKey:)`, which the package's coder
/// answers without containers for the reply and its envelopes.
private struct Direct: Decodable, Equatable {
  var reply: EventsReply<ItemEvent>
  private enum CodingKeys: String, CodingKey { case reply = "r" }
}

/// The same reply through `superDecoder(forKey:)`: a nested decoder, for which the reply takes `Codable`'s
/// containers (`EventsReply.init(from:)`'s general path) with the package's coder too.
private struct ThroughContainers: Decodable, Equatable {
  var reply: EventsReply<ItemEvent>
  private enum CodingKeys: String, CodingKey { case reply = "r" }
  init(from decoder: any Decoder) throws {
    reply = try EventsReply(from: try decoder.container(keyedBy: CodingKeys.self).superDecoder(forKey: .reply))
  }
}

/// A reply encoded among other members, so it is written at a depth and its object closes among others.
private struct Surrounded: Encodable {
  var first = 1
  var reply: EventsReply<ItemEvent>
  var zed = "last"
}

/// What a decoding came to, in terms both coders share.
func outcome(_ decode: () throws -> some Any) -> String { JSONFieldsParity.outcome(decode) }

/// One random edit of a reply's JSON tree: a member dropped, a value of the wrong kind, ids out of order.
func edit(_ tree: inout [String: Any], _ draw: inout Draw) {
  let wrongValues: [Any] = [NSNull(), "text", 7, 1.5, [Any](), [String: Any](), true]
  var events = tree["events"] as? [Any] ?? []
  let target = events.isEmpty ? nil : draw.int(0...events.count - 1)
  switch draw.int(0...7) {
  case 0: tree["events"] = nil
  case 1: tree["events"] = wrongValues[draw.int(0...wrongValues.count - 1)]
  case 2:
    guard let target, var envelope = events[target] as? [String: Any], !envelope.isEmpty else { return }
    let keys = envelope.keys.sorted()
    envelope[keys[draw.int(0...keys.count - 1)]] = nil
    events[target] = envelope
    tree["events"] = events
  case 3:
    guard let target, var envelope = events[target] as? [String: Any], !envelope.isEmpty else { return }
    let keys = envelope.keys.sorted()
    envelope[keys[draw.int(0...keys.count - 1)]] = wrongValues[draw.int(0...wrongValues.count - 1)]
    events[target] = envelope
    tree["events"] = events
  case 4:
    guard let target else { return }
    events[target] = wrongValues[draw.int(0...wrongValues.count - 1)]
    tree["events"] = events
  case 5:
    guard events.count >= 2 else { return }
    let first = draw.int(0...events.count - 2)
    events.swapAt(first, draw.int((first + 1)...(events.count - 1)))
    tree["events"] = events
  case 6: tree["queue_id"] = wrongValues[draw.int(0...wrongValues.count - 1)]
  default: break
  }
}

// The reply and its envelopes go through the package's coder without `Codable`'s containers
// (`EventBatchCoding.swift`); these hold that path to what the containers' path and Foundation's coder do.
@Suite("Event batches through the package's coder without containers")
struct EventBatchCodingTests {
  @Test(
    "edited batches: the same value or the same error as through containers and Foundation",
    .cpuBound,
    arguments: 0..<300
  )
  func editedBatches(seed: UInt64) throws {
    var draw = Draw(seed: seed)
    let reply = eventsReply(&draw)
    var tree = try #require(try JSONSerialization.jsonObject(with: Data(WireJSON.encode(reply))) as? [String: Any])
    if draw.chance(85) { edit(&tree, &draw) }
    let document = try JSONSerialization.data(withJSONObject: ["r": tree], options: [.sortedKeys])
    let bytes = [UInt8](document)
    let direct = outcome { try WireJSON.decode(Direct.self, from: bytes).reply }
    let throughContainers = outcome { try WireJSON.decode(ThroughContainers.self, from: bytes).reply }
    let foundation = outcome { try JSONDecoder().decode(Direct.self, from: document).reply }
    let text = String(decoding: bytes, as: UTF8.self)
    #expect(direct == throughContainers, "seed \(seed): \(text)")
    #expect(direct == foundation, "seed \(seed): \(text)")
    // The events alone, as an array of envelopes: each envelope through its own `init(from:)`.
    if let events = tree["events"] {
      let array = try JSONSerialization.data(withJSONObject: ["r": events], options: [.sortedKeys])
      let alone = outcome { try WireJSON.decode([String: [EventEnvelope<ItemEvent>]].self, from: [UInt8](array)) }
      let aloneByFoundation = outcome {
        try JSONDecoder().decode([String: [EventEnvelope<ItemEvent>]].self, from: array)
      }
      #expect(alone == aloneByFoundation, "seed \(seed): \(String(decoding: array, as: UTF8.self))")
    }
  }

  @Test(
    "envelope keys written with escapes or repeated: what the containers' path reads",
    .cpuBound,
    arguments: 0..<200
  )
  func escapedAndRepeatedKeys(seed: UInt64) throws {
    var draw = Draw(seed: seed)
    let reply = eventsReply(&draw)
    let sorted = String(decoding: try WireJSON.encode(["r": reply]), as: UTF8.self)
    // Each envelope's own keys, written escaped at random (the same names to a JSON reader).
    var text = ""
    var rest = Substring(sorted)
    let escapes = [#""id":"#: #""\u0069d":"#, #""type":"#: #""typ\u0065":"#, #""origin":"#: #""origi\u006e":"#]
    while let next = escapes.keys.compactMap({ key in rest.range(of: key).map { (key, $0) } })
      .min(by: { $0.1.lowerBound < $1.1.lowerBound })
    {
      text += rest[..<next.1.lowerBound]
      text += draw.chance(50) ? escapes[next.0]! : next.0
      rest = rest[next.1.upperBound...]
    }
    text += rest
    // An envelope's `type` or `id` repeated before its own: the first is the one read.
    if draw.chance(50), let envelope = text.range(of: #"{"id":"#, options: .backwards) {
      let repeated = draw.chance(50) ? #""type":"zulip_first","# : #""id":-1,"#
      text.insert(contentsOf: repeated, at: text.index(after: envelope.lowerBound))
    }
    let bytes = Array(text.utf8)
    let direct = outcome { try WireJSON.decode(Direct.self, from: bytes).reply }
    let throughContainers = outcome { try WireJSON.decode(ThroughContainers.self, from: bytes).reply }
    #expect(direct == throughContainers, "seed \(seed): \(text)")
    if !text.contains("zulip_first"), !text.contains(#""id":-1,"#) {
      #expect(direct == outcome { reply }, "seed \(seed): \(text)")
    }
  }

  @Test("a batch written inside another object: Foundation's bytes, sorted or not", .cpuBound, arguments: 0..<100)
  func surrounded(seed: UInt64) throws {
    var draw = Draw(seed: seed)
    let value = Surrounded(reply: eventsReply(&draw))
    #expect(try WireJSON.encode(value) == (try foundationSorted(value)), "seed \(seed)")
    // The envelopes alone, each through its own `encode(to:)`.
    #expect(try WireJSON.encode(value.reply.events) == (try foundationSorted(value.reply.events)), "seed \(seed)")
    // Unsorted, the members come in the order the `Codable` path writes them: the reply's own first.
    let unsorted = String(decoding: try WireJSON.encode(value, sortedKeys: false), as: UTF8.self)
    #expect(unsorted.hasPrefix(#"{"first":1,"reply":{"result":"success","msg":"","events":["#), "seed \(seed)")
    let tree = try #require(try JSONSerialization.jsonObject(with: Data(unsorted.utf8)) as? [String: Any])
    let reply = try JSONSerialization.data(withJSONObject: try #require(tree["reply"]))
    #expect(try JSONDecoder().decode(EventsReply<ItemEvent>.self, from: reply) == value.reply, "seed \(seed)")
  }

  @Test("each envelope's members in the order encode(to:) writes them: payload, id, type, origin")
  func envelopeOrder() throws {
    let origin = MutationOrigin(clientID: ClientID(rawValue: "c"), mutationID: MutationID(rawValue: 3))
    let moved = EventEnvelope<ItemEvent>(id: 4, body: .payload(.moved(Moved(itemID: "i", position: 2))), origin: origin)
    let reply = EventsReply(events: [moved, EventEnvelope(id: 5, body: .heartbeat)], queueID: QueueID(rawValue: "q"))
    let unsorted = String(decoding: try WireJSON.encode(reply, sortedKeys: false), as: UTF8.self)
    #expect(
      unsorted
        == #"{"result":"success","msg":"","events":[{"item_id":"i","position":2,"id":4,"type":"item_moved","#
        + #""origin":{"client_id":"c","mutation_id":3}},{"id":5,"type":"heartbeat"}],"queue_id":"q"}"#
    )
  }
}
