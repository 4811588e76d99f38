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
