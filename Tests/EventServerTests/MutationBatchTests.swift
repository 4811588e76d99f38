import EventProtocol
import Foundation
import SampleApps
import TestScheduling
import Testing
import UpdateMachineTesting

@testable import EventServer

/// Several writes of one client in one request (`POST /api/v1/mutation_batches`): decided in order, each at
/// most once, answered together once durable.
@Suite("Batches of mutations", .hangGuard)
struct MutationBatchTests {
  private func batch(
    _ commands: [NoteBoard.Command],
    from first: UInt64 = 1,
    client: ClientID = "c"
  )
    -> MutationBatch<NoteBoard.Command>
  {
    MutationBatch(
      requests: commands.enumerated().map {
        MutationRequest(clientID: client, mutationID: MutationID(first + UInt64($0.offset)), mutation: $0.element)
      }
    )
  }

  @Test("each write is decided in order; a refusal in the middle refuses that write only")
  func decidedInOrder() throws {
    var machine = makeMachine()
    let (outcomes, _) = try machine.applyMutations(
      batch([.post("one", to: [bob]), .forbidden, .post("three", to: [bob])]),
      from: alice,
      now: t0
    )
    #expect(outcomes.map(\.mutationID) == [MutationID(1), MutationID(2), MutationID(3)])
    guard case .acknowledged(_, let first) = outcomes[0], case .refused(_, let refusal) = outcomes[1],
      case .acknowledged(_, let third) = outcomes[2]
    else {
      Issue.record("unexpected outcomes \(outcomes)")
      return
    }
    #expect(first.applied && third.applied && refusal.code == .badRequest)
    #expect(machine.application.notes[bob] == ["one", "three"])
  }

  @Test("a batch sent again is recognised write by write: nothing applied twice, the refusal repeated")
  func repeatedBatch() throws {
    var machine = makeMachine()
    let sent = batch([.post("one", to: [bob]), .forbidden, .post("three", to: [bob])])
    let (first, _) = try machine.applyMutations(sent, from: alice, now: t0)
    let (again, _) = try machine.applyMutations(sent, from: alice, now: t0)
    #expect(machine.application.notes[bob] == ["one", "three"])
    #expect(again.count == 3)
    for (before, after) in zip(first, again) {
      switch (before, after) {
      case (.acknowledged, .acknowledged(_, let receipt)): #expect(!receipt.applied)
      case (.refused(_, let old), .refused(_, let new)): #expect(old == new)
      default: Issue.record("\(before) became \(after)")
      }
    }
  }

  @Test("decisions stop after MUTATION_ID_REUSED: nothing after it is applied under the old client id")
  func stopsAfterReuse() throws {
    var machine = makeMachine()
    _ = try machine.applyMutations(batch([.post("one", to: [bob])]), from: alice, now: t0)
    let (outcomes, _) = try machine.applyMutations(
      batch([.post("not one", to: [bob]), .post("two", to: [bob])]),
      from: alice,
      now: t0
    )
    #expect(outcomes.count == 1)
    guard case .refused(MutationID(1), let error) = outcomes.first else {
      Issue.record("expected m1 refused as reused, got \(outcomes)")
      return
    }
    #expect(error.code == .mutationIDReused)
    #expect(machine.application.notes[bob] == ["one"])
  }

  @Test("no more of a batch is decided than the client's remembered decisions; the rest wait for the next")
  func decidedWithinTheWindow() throws {
    var machine = makeMachine { $0.mutationWindow = 4 }
    let commands = (1...10).map { NoteBoard.Command.post("n\($0)", to: [bob]) }
    let (outcomes, _) = try machine.applyMutations(batch(commands), from: alice, now: t0)
    #expect(outcomes.count == 4)
    // The whole batch again: its first four are repeats within the window, never "reused".
    let (again, _) = try machine.applyMutations(batch(commands), from: alice, now: t0)
    #expect(again.count == 4)
    #expect(again.allSatisfy { if case .acknowledged(_, let receipt) = $0 { !receipt.applied } else { false } })
    #expect(machine.application.notes[bob] == ["n1", "n2", "n3", "n4"])
  }

  @Test(
    "a batch that cannot be decided is refused whole, before anything is applied",
    arguments: [
      ("empty", MutationBatch<NoteBoard.Command>(requests: [])),
      (
        "too many",
        MutationBatch(
          requests: (1...(MutationBatch<NoteBoard.Command>.maximumCount + 1)).map {
            MutationRequest(clientID: "a", mutationID: MutationID(UInt64($0)), mutation: .post("x", to: [bob]))
          }
        )
      ),
    ]
  )
  func malformedBatch(name: String, batch: MutationBatch<NoteBoard.Command>) {
    var machine = makeMachine()
    #expect(throws: EventAPIError.self, "\(name)") { try machine.applyMutations(batch, from: alice, now: t0) }
    #expect(machine.application.notes[bob] == nil)
    #expect(machine.mutationMemory.records.isEmpty)
  }

  @Test("writes of two clients, or ids that do not increase, are decided write by write, not refused whole")
  func decidedWriteByWrite() throws {
    var machine = makeMachine()
    let batch = MutationBatch(requests: [
      MutationRequest(clientID: "a", mutationID: MutationID(2), mutation: NoteBoard.Command.post("x", to: [bob])),
      MutationRequest(clientID: "b", mutationID: MutationID(1), mutation: .post("y", to: [bob])),
      MutationRequest(clientID: "a", mutationID: MutationID(2), mutation: .post("x", to: [bob])),
    ])
    let (outcomes, _) = try machine.applyMutations(batch, from: alice, now: t0)
    #expect(
      outcomes.map { if case .acknowledged(_, let receipt) = $0 { receipt.applied } else { false } } == [
        true, true, false,
      ]
    )
    #expect(machine.application.notes[bob] == ["x", "y"])
  }

  @Test("outcomes keep their shape on the wire: a receipt or an API error beside each mutation id")
  func wireShape() throws {
    let reply = MutationBatchReply(outcomes: [
      .acknowledged(MutationID(7), MutationReceipt(applied: true, eventsThrough: ["q1": 4])),
      .refused(MutationID(8), .badRequest("no")),
      .refused(MutationID(9), .mutationIDReused(MutationID(9))),
    ])
    let bytes = try WireFormat.encodeSuccess(reply)
    let object = try #require(try JSONSerialization.jsonObject(with: bytes) as? [String: Any])
    let outcomes = try #require(object["outcomes"] as? [[String: Any]])
    #expect(outcomes[0]["mutation_id"] as? Int == 7 && outcomes[0]["result"] as? String == "success")
    #expect(outcomes[0]["applied"] as? Bool == true)
    #expect(outcomes[1]["result"] as? String == "error" && outcomes[1]["code"] as? String == "BAD_REQUEST")
    #expect(try WireFormat.decode(MutationBatchReply.self, from: bytes) == reply)
    #expect(try JSONDecoder().decode(MutationBatchReply.self, from: bytes) == reply)
  }

  @Test("a durable server answers a batch once, when every decision in it is durable")
  func oneWaitForTheLog() async throws {
    let log = HeldServerLog()
    let server = try await startDurableServer(log)
    log.hold()
    let answered = Finished()
    let sent = batch([.post("one", to: [bob]), .post("two", to: [bob]), .post("three", to: [bob])])
    let outcomes = Task {
      let outcomes = try await server.applyMutations(sent, from: alice)
      answered.set()
      return outcomes
    }
    await log.waitForHeldWrite()
    #expect(!answered.value)
    let before = log.inner.stored.records.count
    log.release()
    #expect(try await outcomes.value.count == 3)
    #expect(log.inner.stored.records.count == before + 3)
    #expect(await server.application.notes[bob] == ["one", "two", "three"])
  }
}
