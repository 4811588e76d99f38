import EventProtocol
import SampleApps
import Testing
import UpdateMachineTesting

@testable import UpdateMachine

@Suite("UpdateMachine core: what a batch applies and journals")
struct UpdateMachineCoreBatchTests {
  @Test(
    "a batch with heartbeats, unknown types and events already applied: exactly its new payloads, in order",
    arguments: 0..<200
  )
  func appliedEventsOfMixedBatches(seed: UInt64) {
    var random = SeededRandomNumberGenerator(seed: seed)
    var harness = CoreHarness()
    harness.startLive()
    var lastEventID = -1
    var expectedNotes: [String] = []
    var request: UInt64 = 2
    for _ in 0..<Int.random(in: 1...4, using: &random) {
      // Ids rise from a point at or before the finger: the ones not past it were applied before.
      var id = lastEventID - Int.random(in: 0...2, using: &random)
      var batch: [EventEnvelope<NoteEvent>] = []
      var expected: [(id: Int, text: String)] = []
      for _ in 0..<Int.random(in: 0...8, using: &random) {
        id += 1
        switch Int.random(in: 0..<4, using: &random) {
        case 0: batch.append(EventEnvelope(id: id, body: .heartbeat))
        case 1: batch.append(EventEnvelope(id: id, body: .unknown(type: "zulip_other")))
        default:
          let text = "n\(id)"
          batch.append(note(id, text))
          if id > lastEventID { expected.append((id, text)) }
        }
      }
      let actions = harness.core.pollSucceeded(UpdateMachineTests.request(request), batch, now: t0)
      request += 1
      guard case .persist(_, .applied(let applied))? = actions.first else {
        Issue.record("seed \(seed): no save of the applied events: \(actions)")
        return
      }
      #expect(Array(applied) == expected.map { .note(text: $0.text) }, "seed \(seed)")
      #expect(applied.envelopes.map(\.id) == expected.map(\.id), "seed \(seed)")
      expectedNotes += expected.map(\.text)
      lastEventID = max(lastEventID, batch.last?.id ?? lastEventID)
      _ = harness.acknowledgingSaves(actions, now: t0)
    }
    #expect(harness.core.confirmedState?.notes == expectedNotes, "seed \(seed)")
  }
}

@Suite("StateChange: the events applied since the last save, batch after batch")
struct StateChangeTests {
  @Test("appending keeps earlier batches, shares the first one's array, and leaves a replaced state replaced")
  func appendingBatches() {
    let first = AppliedEvents<NoteEvent>(envelopes: [note(1, "a"), note(2, "b")])
    let second = AppliedEvents<NoteEvent>(envelopes: [note(3, "c")])
    var change = StateChange<NoteEvent>.applied([])
    change.append(first)
    #expect(change == .applied(first))
    let held = change
    change.append(second)
    guard case .applied(let applied) = change else {
      Issue.record("appending to applied events gave \(change)")
      return
    }
    #expect(applied.envelopes.map(\.id) == [1, 2, 3])
    #expect(Array(applied) == [.note(text: "a"), .note(text: "b"), .note(text: "c")])
    // A copy taken before the append is not changed by it.
    #expect(held == .applied(first))
    var replaced = StateChange<NoteEvent>.replaced
    replaced.append(second)
    #expect(replaced == .replaced)
  }
}
