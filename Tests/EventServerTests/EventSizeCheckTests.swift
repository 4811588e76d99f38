import EventProtocol
import Foundation
import JSONCoding
import SampleApps
import Testing

@testable import EventServer

/// The event size check encodes each event once; a poll's answer carries those bytes, so encoding the answer
/// copies them instead of encoding every payload again.
@Suite("the event size check: exact, and its encoding reused by answers")
struct EventSizeCheckTests {
  @Test("each answered event carries the size check's encoding, and the answer's JSON is Foundation's")
  func answersCarryTheEncoding() throws {
    var machine = makeMachine()
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = try machine.handle(.post("from bob: \"quoted\" / é 😀", to: [alice, bob]), from: bob, now: t0)
    let request = MutationRequest(
      clientID: "alice-phone",
      mutationID: MutationID(1),
      mutation: NoteBoard.Command.post("mine", to: [alice])
    )
    _ = try machine.applyMutation(request, from: alice, now: t0)
    let events = try #require(machine.queue(queue)?.events)
    #expect(events.count == 2)
    #expect(events.allSatisfy { $0.encodedPayload != nil })
    #expect(events.last?.origin != nil)

    let reply = EventsReply(events: events, queueID: queue)
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    #expect(try WireJSON.encode(reply) == [UInt8](try encoder.encode(reply)))
  }

  @Test("without a size limit nothing is encoded")
  func noLimitNoEncoding() throws {
    var machine = makeMachine { $0.maximumEventBytes = nil }
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = try machine.handle(.post("hello", to: [alice]), from: bob, now: t0)
    #expect(machine.queue(queue)?.events.first?.encodedPayload == nil)
  }

  @Test("an event exactly at the limit fits; one byte over is counted as oversize", arguments: [0, 1, 40])
  func limitIsExact(length: Int) throws {
    let event = NoteEvent.note(text: String(repeating: "\\", count: length))
    let size = try WireJSON.encode(EventEnvelope(id: Int.max, body: .payload(event)), sortedKeys: false).count
    for (limit, oversize) in [(size, 0), (size - 1, 1)] {
      var machine = makeMachine { $0.maximumEventBytes = limit }
      _ = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0)
      _ = try machine.handle(.post(String(repeating: "\\", count: length), to: [alice]), from: bob, now: t0)
      #expect(machine.oversizeEvents == oversize, "limit \(limit), envelope \(size) bytes")
    }
  }
}
