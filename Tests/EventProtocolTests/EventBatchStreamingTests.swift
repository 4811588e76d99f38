import Foundation
import JSONCoding
import JSONTestSupport
import TestScheduling
import Testing

@testable import EventProtocol

/// A poll's answer as a server writes it: the reply's members beside `result` and `msg`, at the root.
private func answer(_ tree: [String: Any]) throws -> [UInt8] {
  var root = tree
  root["result"] = "success"
  root["msg"] = ""
  return [UInt8](try JSONSerialization.data(withJSONObject: root, options: [.sortedKeys]))
}

/// `WireFormat.decode` of an ``EventsReply``, its events decoded as the body is parsed or from the whole
/// tape (`EventBatchStreaming.swift`).
private func decoded(_ bytes: [UInt8], streaming: Bool) -> String {
  outcome { try WireFormat.decode(EventsReply<ItemEvent>.self, from: bytes, streamingEvents: streaming) }
}

// A poll's events are decoded as its body is parsed, so that the body's tape does not hold them all; these
// hold that path to the whole tape's: the same value or the same error, message and coding path included.
@Suite("Event batches decoded as the body is parsed")
struct EventBatchStreamingTests {
  @Test(
    "edited answers: the same value or error as from the whole tape, and Foundation's value",
    .cpuBound,
    arguments: 0..<300
  )
  func editedAnswers(seed: UInt64) throws {
    var draw = Draw(seed: seed)
    let reply = eventsReply(&draw)
    var tree = try #require(try JSONSerialization.jsonObject(with: Data(WireJSON.encode(reply))) as? [String: Any])
    if draw.chance(85) { edit(&tree, &draw) }
    var bytes = try answer(tree)
    if draw.chance(20) {
      // A syntax error after the events (the answer ends `…"success"}`): reported before any envelope's
      // decoding error, as when the whole body is parsed first.
      bytes.removeLast(draw.int(1...2))
    }
    let text = String(decoding: bytes, as: UTF8.self)
    let streamed = decoded(bytes, streaming: true)
    #expect(streamed == decoded(bytes, streaming: false), "seed \(seed): \(text)")
    let foundation = Result { try JSONDecoder().decode(EventsReply<ItemEvent>.self, from: Data(bytes)) }
    switch foundation {
    case .success(let value): #expect(streamed == outcome { value }, "seed \(seed): \(text)")
    case .failure: #expect(streamed.hasPrefix("value") == false, "seed \(seed): \(text)")
    }
  }

  @Test("a long answer: the tape of its elements starts again, and an error names its envelope's index")
  func longAnswer() throws {
    // 2,000 envelopes of 9 entries each: the elements' tape starts again several times.
    let events = (1...2_000).map {
      EventEnvelope<ItemEvent>(id: $0, body: .payload(.moved(Moved(itemID: "i\($0)", position: $0))), origin: nil)
    }
    let reply = EventsReply(events: events, queueID: "q")
    var tree = try #require(try JSONSerialization.jsonObject(with: Data(WireJSON.encode(reply))) as? [String: Any])
    #expect(try WireFormat.decode(EventsReply<ItemEvent>.self, from: try answer(tree)) == reply)
    var broken = tree["events"] as! [Any]
    var envelope = broken[1_800] as! [String: Any]
    envelope["position"] = "far"
    broken[1_800] = envelope
    tree["events"] = broken
    let bytes = try answer(tree)
    let streamed = decoded(bytes, streaming: true)
    #expect(streamed == decoded(bytes, streaming: false))
    #expect(streamed.contains("1800"), "\(streamed)")
  }

  @Test("the events key escaped, repeated, or not an array: what the whole tape reads")
  func unusualEventsMembers() throws {
    let envelope = #"{"id":3,"item_id":"a","position":1,"type":"item_moved"}"#
    let answers = [
      #"{"\u0065vents":[\#(envelope)],"msg":"","result":"success"}"#,
      #"{"events":[\#(envelope)],"events":[],"msg":"","result":"success"}"#,
      #"{"events":7,"events":[\#(envelope)],"msg":"","result":"success"}"#,
      #"{"events":{"0":1},"msg":"","result":"success"}"#,
      #"{"events":[],"msg":"","result":"success"}"#,
      #"{"msg":"","result":"success","events":[\#(envelope),\#(envelope)]}"#,
      #"{"nested":{"events":[1]},"events":[\#(envelope)],"msg":"","result":"success"}"#,
      #"{"events":[\#(envelope)],"msg":"","result":"error","code":"BAD_EVENT_QUEUE_ID"}"#,
      #"{"events":[\#(envelope),],"msg":"","result":"success"}"#,
      #"{"events":[\#(envelope) \#(envelope)],"msg":"","result":"success"}"#,
    ]
    for text in answers {
      let bytes = Array(text.utf8)
      #expect(decoded(bytes, streaming: true) == decoded(bytes, streaming: false), "\(text)")
    }
    #expect(decoded(Array(answers[0].utf8), streaming: true).hasPrefix("value"))
    #expect(decoded(Array(answers[5].utf8), streaming: true).contains("ids must strictly increase"))
  }
}
