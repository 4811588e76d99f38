import EventProtocol
import SampleApps
import Testing
import UpdateMachineTesting

@testable import UpdateMachine

@Suite("UpdateMachine core: the outbox")
struct UpdateMachineCoreOutboxTests {
  @Test("a mutation is persisted before it is first sent, and shown optimistically")
  func persistedBeforeSent() throws {
    var harness = CoreHarness()
    harness.startLive(notes: ["a"])
    let (id, actions) = harness.submit(.post("mine", to: [alice]), now: t0)
    #expect(id == MutationID(1))
    let clientID = try #require(harness.core.clientID)
    var persistedBeforeSending = harness.record
    persistedBeforeSending.outbox[0].attempts = 0
    #expect(harness.record.outbox[0].attempts == 1)
    #expect(
      actions == [
        .persist(persistedBeforeSending),
        .submit(
          request(3),
          MutationRequest(clientID: clientID, mutationID: id, mutation: .post("mine", to: [alice])),
          queueID: queueA
        ),
      ]
    )
    #expect(harness.record.outbox.map(\.id) == [id])
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["a", "mine"]))
    #expect(harness.core.confirmedState == NoteSnapshot(notes: ["a"]))
  }

  @Test("an acknowledged mutation stays shown until the finger reaches its event, then leaves the outbox")
  func confirmedByEvent() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.submit(.post("mine", to: [alice]), now: t0)
    let receipt = MutationReceipt(applied: true, eventsThrough: [queueA: 0])
    _ = harness.core.submitSucceeded(request(3), receipt, now: t0)
    #expect(harness.core.pendingMutations.map(\.receipt) == [receipt])
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["mine"]))
    _ = harness.core.pollSucceeded(request(2), [note(0, "mine")], now: t0)
    #expect(harness.core.pendingMutations.isEmpty)
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["mine"]))
  }

  @Test("a snapshot from a queue registered after the mutation confirms it")
  func confirmedBySnapshot() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.submit(.post("mine", to: [alice]), now: t0)
    _ = harness.core.submitSucceeded(request(3), MutationReceipt(applied: true, eventsThrough: [queueA: 0]), now: t0)
    _ = harness.core.pollFailed(request(2), .api(.badEventQueueID(queueA)), now: t0)
    _ = harness.core.registerSucceeded(request(4), registration(queueB, notes: ["mine"]), now: t0)
    #expect(harness.core.pendingMutations.isEmpty)
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["mine"]))
  }

  @Test("failed sends retry with backoff, one at a time, in order")
  func retriesInOrder() throws {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.submit(.post("one", to: [alice]), now: t0)
    let (second, queued) = harness.submit(.post("two", to: [alice]), now: t0)
    #expect(queued == [.persist(harness.record)])
    #expect(harness.core.submitFailed(request(3), .connectionFailed(), now: t0) == [])
    let retryAt = try #require(harness.core.nextWakeUp(after: t0))
    #expect(retryAt <= t0.advanced(by: .milliseconds(100)))
    let resent = harness.core.timerFired(now: retryAt)
    guard case .submit(request(4), let body, _) = resent.first else {
      Issue.record("expected a resend, got \(resent)")
      return
    }
    #expect(body.mutationID == MutationID(1))
    _ = harness.core.submitSucceeded(
      request(4),
      MutationReceipt(applied: true, eventsThrough: [queueA: 0]),
      now: retryAt
    )
    #expect(harness.core.pendingMutations.first { !$0.isAcknowledged }?.id == second)
  }

  @Test("a refused mutation is dropped from the outbox and reported")
  func rejected() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.submit(.forbidden, now: t0)
    let actions = harness.core.submitFailed(request(3), .api(.badRequest("alice may not do that")), now: t0)
    #expect(actions == [.persist(harness.record)])
    #expect(harness.core.pendingMutations.isEmpty)
    #expect(
      harness.core.rejected == [
        RejectedMutation(id: MutationID(1), mutation: .forbidden, reason: "alice may not do that")
      ]
    )
  }

  @Test("dismissed rejections are forgotten and the record persisted")
  func dismissRejections() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.submit(.forbidden, now: t0)
    _ = harness.core.submitFailed(request(3), .api(.badRequest("no")), now: t0)
    _ = harness.submit(.forbidden, now: t0)
    _ = harness.core.submitFailed(request(4), .api(.badRequest("no")), now: t0)
    #expect(harness.core.rejected.map(\.id) == [MutationID(1), MutationID(2)])
    #expect(harness.core.rejectionsDismissed(through: MutationID(1), now: t0) == [.persist(harness.record)])
    #expect(harness.core.rejected.map(\.id) == [MutationID(2)])
    #expect(harness.core.rejectionsDismissed(through: MutationID(1), now: t0) == [])
  }

  @Test("the outbox survives a restart and unacknowledged entries are sent again")
  func survivesRestart() throws {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.submit(.post("kept", to: [alice]), now: t0)
    var restarted = CoreHarness(seed: 9)
    let actions = restarted.core.loaded(harness.record, now: t0)
    let clientID = try #require(harness.core.clientID)
    #expect(
      actions.contains(
        .submit(
          request(2),
          MutationRequest(clientID: clientID, mutationID: MutationID(1), mutation: .post("kept", to: [alice])),
          queueID: queueA
        )
      )
    )
    let (next, _) = restarted.submit(.post("more", to: [alice]), now: t0)
    #expect(next == MutationID(2))
  }
}
