import EventProtocol
import Foundation
import JSONCoding
import JSONTestSupport
import TestScheduling
import Testing

// The protocol's event batches through the package's JSON coder: Foundation's bytes out, the same batch back.

/// Two flat event cases with the envelope's fields beside them, as the protocol sends them.
struct Renamed: Codable, Sendable, Equatable {
  var itemID: String
  var title: String
  private enum CodingKeys: String, CodingKey {
    case itemID = "item_id"
    case title
  }
}

struct Moved: Codable, Sendable, Equatable {
  var itemID: String
  var position: Int
  private enum CodingKeys: String, CodingKey {
    case itemID = "item_id"
    case position
  }
}

enum ItemEvent: TaggedEventPayload {
  case renamed(Renamed)
  case moved(Moved)
  static let cases = [EventCase("item_renamed", Self.renamed), EventCase("item_moved", Self.moved)]
}

func eventsReply(_ draw: inout Draw) -> EventsReply<ItemEvent> {
  var id = draw.int(-1...5)
  let events = (0..<draw.int(0...8)).map { _ -> EventEnvelope<ItemEvent> in
    id += draw.int(1...3)
    let body: EventBody<ItemEvent> =
      switch draw.int(0...4) {
      case 0: .heartbeat
      case 1: .restart
      case 2: .unknown(type: "zulip_" + draw.key())
      case 3: .payload(.renamed(Renamed(itemID: draw.key(), title: draw.string())))
      default: .payload(.moved(Moved(itemID: draw.key(), position: draw.int(-9...99))))
      }
    let origin =
      draw.chance(30)
      ? MutationOrigin(
        clientID: ClientID(rawValue: draw.key()),
        mutationID: MutationID(rawValue: UInt64(draw.int(0...99)))
      )
      : nil
    return EventEnvelope(id: id, body: body, origin: origin)
  }
  return EventsReply(events: events, queueID: draw.chance(70) ? QueueID(rawValue: draw.key()) : nil)
}

@Suite("Event batches through WireJSON against Foundation")
struct EventBatchWireJSONTests {
  @Test("the protocol's event batches: Foundation's bytes out, the same batch back", .cpuBound, arguments: 0..<200)
  func randomEventBatches(seed: UInt64) throws {
    var draw = Draw(seed: seed)
    let reply = eventsReply(&draw)
    let ours = try WireJSON.encode(reply)
    let reference = try foundationSorted(reply)
    #expect(String(decoding: ours, as: UTF8.self) == String(decoding: reference, as: UTF8.self), "seed \(seed)")
    #expect(try WireJSON.decode(EventsReply<ItemEvent>.self, from: ours) == reply)
    #expect(try JSONDecoder().decode(EventsReply<ItemEvent>.self, from: Data(ours)) == reply)
  }
}
