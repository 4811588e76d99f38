import EventProtocol
import Foundation
import JSONCoding
import SampleApps
import Testing

@testable import UpdateMachine

/// A journal entry copies the payload members the server's size check kept (in process) instead of encoding
/// the payload again. The test tells which bytes were written by making them differ from the payload's.
@Suite("Journal entries copy the payload bytes the server kept")
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

  @Test("events decoded from a poll's answer are journaled as they arrived, and replay")
  func decodedEvents() throws {
    let answer = #"""
      {"result":"success","msg":"","queue_id":"q","events":[
        {"type":"note","id":7,"text":"caf\u00e9","origin":{"client_id":"device","mutation_id":3}},
        {"id":8,"type":"heartbeat"},
        {"type":"note","text":"two","id":9}]}
      """#
    let reply = try WireJSON.decode(EventsReply<NoteEvent>.self, from: Array(answer.utf8))
    let applied = AppliedEvents(envelopes: reply.events.filter { if case .payload = $0.body { true } else { false } })
    #expect(Array(applied) == [.note(text: "café"), .note(text: "two")])

    // Each applied envelope's object is copied from the answer's bytes as it came (its members in their
    // order, its escapes, its id and origin), instead of its payload being encoded again.
    let entry = try JournalEntry(record(notes: ["one"]), events: applied).encoded()
    let text = String(decoding: entry, as: UTF8.self)
    #expect(
      text.contains(
        #"[{"type":"note","id":7,"text":"caf\u00e9","origin":{"client_id":"device","mutation_id":3}},"#
          + #"{"type":"note","text":"two","id":9}]"#
      )
    )
    // An envelope whose body changed after it arrived is encoded again.
    var changed = applied.envelopes
    changed[1].body = .payload(.note(text: "three"))
    let edited = try JournalEntry(record(notes: []), events: AppliedEvents(envelopes: changed)).encoded()
    #expect(String(decoding: edited, as: UTF8.self).contains(#"{"text":"three","id":9,"type":"note"}]"#))
    let replayed = JournalEntry.replay([entry], onto: record(notes: ["one"]), with: reducer)
    #expect(replayed.replayed == 1)
    #expect(replayed.record.state.notes == ["one", "café", "two"])
  }

  @Test("an entry written as one batch: the bytes Foundation writes for it, sorted; unsorted, the same JSON")
  func batchMatchesFoundation() throws {
    let kept = try #require(try EncodedMembers.encoding(NoteEvent.note(text: "kept/\u{1}")))
    let envelopes = [
      EventEnvelope<NoteEvent>(id: 3, body: .payload(.note(text: "kept/\u{1}")), origin: nil, encodedPayload: kept),
      EventEnvelope(id: 4, body: .heartbeat),
      EventEnvelope(
        id: 5,
        body: .payload(.note(text: "caf\u{e9} \"x\"")),
        origin: MutationOrigin(clientID: "d", mutationID: MutationID(1))
      ),
      EventEnvelope(id: 6, body: .unknown(type: "zulip_other")),
    ]
    let entry = JournalEntry<NoteEvent, NoteBoard.Command>(
      record(notes: ["one"]),
      events: AppliedEvents(envelopes: envelopes)
    )
    let sorting = JSONEncoder()
    sorting.outputFormatting = [.sortedKeys]
    #expect(try WireJSON.encode(entry) == [UInt8](try sorting.encode(entry)))
    let unsorted = try JSONSerialization.jsonObject(with: try entry.encoded()) as? NSDictionary
    let foundation = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(entry)) as? NSDictionary
    #expect(unsorted != nil && unsorted == foundation)
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
    // With the id and origin it came with (replay reads neither), after the kept members.
    #expect(
      text.contains(#"{"text":"kept","id":41,"type":"note","origin":{"client_id":"device","mutation_id":2}}"#)
    )
    #expect(JournalEntry.replay([entry], onto: record(notes: []), with: reducer).record.state.notes == ["kept"])

    // Payloads given alone (a custom store's or a tool's entry) are encoded.
    let alone = try record(notes: []).journalEntry(appending: [NoteEvent.note(text: "body")])
    #expect(String(decoding: alone, as: UTF8.self).contains(#"{"text":"body","id":0,"type":"note"}"#))
  }
}
