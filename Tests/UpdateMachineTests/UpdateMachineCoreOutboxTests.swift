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
    persistedBeforeSending.outbox[0].sentOnQueue = nil
    #expect(harness.record.outbox[0].attempts == 1)
    #expect(harness.record.outbox[0].sentOnQueue == queueA)
    #expect(
      actions == [
        .persist(persistedBeforeSending, .applied([])),
        .submit(
          request(3),
          MutationBatch(requests: [
            MutationRequest(clientID: clientID, mutationID: id, mutation: .post("mine", to: [alice]))
          ]),
          queueID: queueA
        ),
      ]
    )
    #expect(harness.record.outbox.map(\.id) == [id])
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["a", "mine"]))
    #expect(harness.core.confirmedState == NoteSnapshot(notes: ["a"]))
  }

  @Test("writes submitted together are saved once, shown in order, and sent in one batch after that save")
  func submittedTogether() throws {
    var harness = CoreHarness()
    harness.startLive(notes: ["a"])
    let writes: [NoteBoard.Command] = [
      .post("one", to: [alice]), .post("two", to: [alice]), .post("three", to: [alice]),
    ]
    let (ids, actions) = harness.core.submit(contentsOf: writes, now: t0)
    #expect(ids == [MutationID(1), MutationID(2), MutationID(3)])
    // One save holding all three, and nothing sent before it succeeds.
    #expect(actions.count == 1)
    guard case .persist(let record, _) = actions.first else {
      Issue.record("expected one save, got \(actions)")
      return
    }
    #expect(record.outbox.map(\.id) == ids)
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["a", "one", "two", "three"]))
    let sent = harness.core.persistSucceeded(record, now: t0)
    guard case .submit(_, let batch, _) = sent.first else {
      Issue.record("expected a send after the save, got \(sent)")
      return
    }
    #expect(batch.requests.map(\.mutationID) == ids)
    #expect(batch.requests.map(\.mutation) == writes)
    #expect(harness.core.submit(contentsOf: [], now: t0) == ([], []))
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

  @Test("failed sends retry with backoff; a resend carries every waiting write in order; undecided ones go next")
  func retriesInOrder() throws {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.submit(.post("one", to: [alice]), now: t0)
    let (second, queued) = harness.submit(.post("two", to: [alice]), now: t0)
    #expect(queued == [.persist(harness.record, .applied([]))])
    #expect(harness.core.submitFailed(request(3), .connectionFailed(), now: t0) == [])
    let retryAt = try #require(harness.core.nextWakeUp(after: t0))
    #expect(retryAt <= t0.advanced(by: .milliseconds(100)))
    let resent = harness.core.timerFired(now: retryAt)
    guard case .submit(request(4), let body, _) = resent.first else {
      Issue.record("expected a resend, got \(resent)")
      return
    }
    #expect(body.requests.map(\.mutationID) == [MutationID(1), second])
    // The server decided only the first (a transport without batches answers one outcome).
    let next = harness.core.submitAnswered(
      request(4),
      [.acknowledged(MutationID(1), MutationReceipt(applied: true, eventsThrough: [queueA: 0]))],
      now: retryAt
    )
    #expect(harness.core.pendingMutations.first { !$0.isAcknowledged }?.id == second)
    #expect(harness.core.metrics.failures == 1)
    // The next batch waits for a record holding the answer: a crash must not leave two decided batches
    // looking unsent.
    #expect(!next.contains { if case .submit = $0 { true } else { false } })
    let afterSave = harness.core.persistSucceeded(harness.record, now: retryAt)
    let sentNext = afterSave.compactMap {
      if case .submit(_, let body, _) = $0 { body.requests.map(\.mutationID) } else { nil }
    }
    #expect(sentNext == [[second]])
  }

  @Test("a refused mutation is dropped from the outbox and reported")
  func rejected() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.submit(.forbidden, now: t0)
    let actions = harness.core.submitFailed(request(3), .api(.badRequest("alice may not do that")), now: t0)
    #expect(actions == [.persist(harness.record, .applied([]))])
    #expect(harness.core.pendingMutations.isEmpty)
    #expect(
      harness.core.rejectedMutations == [
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
    #expect(harness.core.rejectedMutations.map(\.id) == [MutationID(1), MutationID(2)])
    #expect(
      harness.core.rejectionsDismissed(through: MutationID(1), now: t0) == [.persist(harness.record, .applied([]))]
    )
    #expect(harness.core.rejectedMutations.map(\.id) == [MutationID(2)])
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
          MutationBatch(requests: [
            MutationRequest(clientID: clientID, mutationID: MutationID(1), mutation: .post("kept", to: [alice]))
          ]),
          queueID: queueA
        )
      )
    )
    let (next, _) = restarted.submit(.post("more", to: [alice]), now: t0)
    #expect(next == MutationID(2))
  }

  @Test("an own event arriving before the acknowledgement shows the write once and retires it at once")
  func ownEventBeforeAcknowledgement() throws {
    var harness = CoreHarness()
    harness.startLive(notes: ["a"])
    _ = harness.submit(.post("mine", to: [alice]), now: t0)
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["a", "mine"]))
    let origin = MutationOrigin(clientID: try #require(harness.core.clientID), mutationID: MutationID(1))
    let ownEvent = EventEnvelope<NoteEvent>(id: 0, body: .payload(.note(text: "mine")), origin: origin)
    _ = harness.core.pollSucceeded(request(2), [ownEvent], now: t0)
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["a", "mine"]))
    #expect(harness.core.confirmedState == NoteSnapshot(notes: ["a", "mine"]))
    #expect(harness.core.pendingMutations.isEmpty)
    #expect(harness.record.outbox.isEmpty)
    let lateAcknowledgement = harness.core.submitSucceeded(
      request(3),
      MutationReceipt(applied: true, eventsThrough: [queueA: 0]),
      now: t0
    )
    #expect(lateAcknowledgement.allSatisfy { if case .persist = $0 { true } else { false } })
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["a", "mine"]))
  }

  @Test("an event from another installation's write with the same mutation id retires nothing")
  func otherClientsOriginIgnored() {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.submit(.post("mine", to: [alice]), now: t0)
    let theirs = EventEnvelope<NoteEvent>(
      id: 0,
      body: .payload(.note(text: "theirs")),
      origin: MutationOrigin(clientID: "another-install", mutationID: MutationID(1))
    )
    _ = harness.core.pollSucceeded(request(2), [theirs], now: t0)
    #expect(harness.core.pendingMutations.map(\.id) == [MutationID(1)])
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["theirs", "mine"]))
  }

  @Test("a write whose save failed is shown but not sent; the save is retried, then the write goes")
  func notSentUntilSaved() throws {
    var harness = CoreHarness()
    harness.startLive()
    let (id, actions) = harness.core.submit(.post("mine", to: [alice]), now: t0)
    #expect(actions == [.persist(harness.record, .applied([]))])
    #expect(harness.core.persistFailed(.writeFailed("disk full"), now: t0) == [])
    #expect(harness.core.persistenceIssue == .writeFailed("disk full"))
    #expect(harness.core.displayedState == NoteSnapshot(notes: ["mine"]))
    #expect(harness.core.pushReceived(.init(), now: t0).allSatisfy { if case .submit = $0 { false } else { true } })
    let retryAt = try #require(harness.core.nextWakeUp(after: t0.advanced(by: .milliseconds(1))))
    #expect(retryAt <= t0.advanced(by: .milliseconds(100)))
    let retried = harness.core.timerFired(now: retryAt)
    // The failed save's change is not in the store: the retry writes the whole record.
    #expect(retried.first == .persist(harness.record, .replaced))
    #expect(harness.core.persistFailed(.writeFailed("read-only file system"), now: retryAt) == [])
    #expect(harness.core.persistenceIssue == .writeFailed("disk full"))
    let sent = harness.core.persistSucceeded(harness.record, now: retryAt)
    #expect(harness.core.persistenceIssue == nil)
    guard case .submit(_, let body, _)? = sent.last else {
      Issue.record("expected the write to go once saved, got \(sent)")
      return
    }
    #expect(body.requests.map(\.mutationID) == [id])
  }

  @Test("a crash after a failed save never reuses an id that reached the server")
  func failedSaveThenCrash() throws {
    var harness = CoreHarness()
    harness.startLive()
    let saved = harness.record
    _ = harness.core.submit(.post("lost in the crash", to: [alice]), now: t0)
    _ = harness.core.persistFailed(.writeFailed("disk full"), now: t0)
    var restarted = CoreHarness(seed: 2)
    _ = restarted.core.loaded(saved, now: t0)
    let (id, actions) = restarted.submit(.post("after the crash", to: [alice]), now: t0)
    #expect(id == MutationID(1))
    let sent = actions.compactMap { if case .submit(_, let body, _) = $0 { body } else { nil } }
    #expect(sent.flatMap(\.requests).map(\.mutation) == [.post("after the crash", to: [alice])])
  }

  @Test("MUTATION_ID_REUSED makes the outbox take a new client id, save, and send the write again")
  func reusedIDRecovery() throws {
    var harness = CoreHarness()
    harness.startLive()
    _ = harness.submit(.post("mine", to: [alice]), now: t0)
    let oldClientID = try #require(harness.core.clientID)
    let actions = harness.core.submitFailed(request(3), .api(.mutationIDReused(MutationID(1))), now: t0)
    let newClientID = try #require(harness.core.clientID)
    #expect(newClientID != oldClientID)
    #expect(actions == [.persist(harness.record, .applied([]))])
    #expect(harness.core.metrics.clientIDResets == 1)
    let resent = harness.core.persistSucceeded(harness.record, now: t0)
    #expect(
      resent == [
        .submit(
          request(4),
          MutationBatch(requests: [
            MutationRequest(clientID: newClientID, mutationID: MutationID(1), mutation: .post("mine", to: [alice]))
          ]),
          queueID: queueA
        )
      ]
    )
  }
}
