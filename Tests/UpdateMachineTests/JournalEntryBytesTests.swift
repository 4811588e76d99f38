import EventProtocol
import Foundation
import JSONCoding
import SampleApps
import Testing

@testable import UpdateMachine

/// A journal entry copies each payload's members instead of encoding the payload again: as they arrived in a
/// poll's answer, or as the server's size check kept them in process. These tests tell which bytes were
/// written by making them differ from what encoding the payload gives.
@Suite("Journal entries copy the payload bytes a batch arrived with")
struct JournalEntryBytesTests {
  let reducer = NotesReducer(user: "alice")

  func record(notes: [String]) -> PersistedRecord<NoteSnapshot, NoteBoard.Command> {
    PersistedRecord(
      clientID: "device",
      state: NoteSnapshot(notes: notes),
      finger: EventFinger(queueID: "q", lastEventID: 8),
      lastContactAt: Timestamp(secondsSinceEpoch: 1_790_000_000),
      dataAsOf: Timestamp(secondsSinceEpoch: 1_790_000_000),
      queueLifetime: .seconds(600),
      longPollTimeout: .seconds(90),
      outbox: [],
      rejected: [],
      nextMutationID: MutationID(1)
    )
  }

  @Test("an event decoded from a poll's answer is journaled with its payload's bytes as they arrived")
  func arrivedBytes() throws {
    // `caf\u00e9` and the spaces inside `extra` are not how the package's coder writes them; `extra` is a
    // member `NoteEvent` does not read, which the journal keeps.
    let answer = #"""
      {"result":"success","msg":"","queue_id":"q","events":[
        {"extra": {"b": 1, "a": [true, null]}, "type":"note","id":7,"text":"caf\u00e9","origin":{"client_id":"device","mutation_id":3}},
        {"id":8,"type":"heartbeat"},
        {"type":"note","text":"two","id":9}]}
      """#
    let reply = try WireJSON.decode(EventsReply<NoteEvent>.self, from: Array(answer.utf8))
    #expect(reply.events.map(\.body) == [.payload(.note(text: "café")), .heartbeat, .payload(.note(text: "two"))])
    let applied = AppliedEvents(envelopes: reply.events.filter { if case .payload = $0.body { true } else { false } })

    let entry = try JournalEntry(record(notes: ["one"]), events: applied).encoded()
    let text = String(decoding: entry, as: UTF8.self)
    #expect(text.contains(#"{"extra":{"b": 1, "a": [true, null]},"text":"caf\u00e9","id":0,"type":"note"}"#))
    #expect(text.contains(#"{"text":"two","id":1,"type":"note"}"#))
    #expect(!text.contains("origin"))

    // The entry replays to the events' payloads.
    let replayed = JournalEntry.replay([entry], onto: record(notes: ["one"]), with: reducer)
    #expect(replayed.replayed == 1)
    #expect(replayed.record.state.notes == ["one", "café", "two"])

    // Where keys are sorted (an answer a server writes), the arrived bytes are not copied: the payload is
    // encoded, and the bytes are Foundation's.
    let sorted = try WireJSON.encode(reply, sortedKeys: true)
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    let fresh = reply.events.map { EventEnvelope(id: $0.id, body: $0.body, origin: $0.origin) }
    #expect(sorted == Array(try encoder.encode(EventsReply(events: fresh, queueID: "q"))))
  }

  @Test("an event from the server in process is journaled with the members its size check kept")
  func keptBytes() throws {
    // The kept members say `kept` while the body says `body`: the entry shows which one was written.
    let kept = try #require(try EncodedMembers.encoding(NoteEvent.note(text: "kept")))
    let envelope = EventEnvelope<NoteEvent>(
      id: 41,
      body: .payload(.note(text: "body")),
      origin: MutationOrigin(clientID: "device", mutationID: MutationID(2)),
      encodedPayload: kept
    )
    let entry = try JournalEntry(record(notes: []), events: AppliedEvents(envelopes: [envelope])).encoded()
    let text = String(decoding: entry, as: UTF8.self)
    #expect(text.contains(#"{"text":"kept","id":0,"type":"note"}"#))

    // Payloads given alone (a custom store's or a tool's entry) are encoded.
    let alone = try record(notes: []).journalEntry(appending: [NoteEvent.note(text: "body")])
    #expect(String(decoding: alone, as: UTF8.self).contains(#"{"text":"body","id":0,"type":"note"}"#))
  }
}
