import EventProtocol
import Testing

@testable import UpdateMachine

/// Whole-state tests of the outbox machine: each transition edits a copy of the old outbox into the
/// expected one and compares whole values.
@Suite("Outbox state machine")
struct OutboxTests {
  typealias Box = Outbox<String>

  let client: ClientID = "client-1"
  let receipt = MutationReceipt(applied: true, eventsThrough: ["q": 4])

  func request(_ number: UInt64) -> RequestID { RequestID(rawValue: number) }

  /// An outbox holding `texts` as m1, m2, …, all saved.
  func savedOutbox(_ texts: String...) -> Box {
    var outbox = Box(clientID: client)
    for text in texts { _ = outbox.append(text, now: t0) }
    outbox.saved(clientID: client, nextMutationID: outbox.nextMutationID)
    return outbox
  }

  @Test("a write is not sendable until a save holding it succeeded")
  func sendOnlyOnceSaved() {
    var outbox = Box(clientID: client)
    let id = outbox.append("a", now: t0)
    #expect(id == MutationID(1))
    let before = outbox
    #expect(!outbox.canSend(now: t0))
    let body = outbox.send(request(1), now: t0, deadline: t0)
    #expect(body == nil)
    #expect(outbox == before)
    outbox.saved(clientID: "someone-else", nextMutationID: MutationID(2))
    #expect(outbox == before)
    outbox.saved(clientID: client, nextMutationID: MutationID(2))
    #expect(outbox.canSend(now: t0))
  }

  @Test("a new write replaces only writes never sent, keeps the others' order, and asks about the unsent alone")
  func replacesOnlyUnsentWrites() {
    var outbox = savedOutbox("pos-1", "pos-2", "note", "pos-3", "other", "pos-4")
    // m1 and m2 go and m1 is acknowledged: neither may be replaced (either may have been applied).
    _ = outbox.send(request(1), now: t0, deadline: t0.advanced(by: .seconds(30)), maximumCount: 2)
    _ = outbox.answered(request(1), [.acknowledged(MutationID(1), receipt)], failureWait: .zero, now: t0)
    var asked: [String] = []
    let id = outbox.append("pos-5", now: t0) { older in
      asked.append(older)
      return older.hasPrefix("pos-")
    }
    #expect(id == MutationID(7))
    #expect(outbox.entries.map(\.mutation) == ["pos-1", "pos-2", "note", "other", "pos-5"])
    #expect(outbox.entries.map(\.id.rawValue) == [1, 2, 3, 5, 7])
    #expect(asked == ["note", "pos-3", "other", "pos-4"])
  }

  @Test("sending marks the oldest unacknowledged write in flight with its deadline; one at a time")
  func sendOneAtATime() {
    var outbox = savedOutbox("a", "b")
    var expected = outbox
    let deadline = t0.advanced(by: .seconds(30))
    let body = outbox.send(request(7), now: t0, deadline: deadline)
    #expect(
      body == MutationBatch(requests: [MutationRequest(clientID: client, mutationID: MutationID(1), mutation: "a")])
    )
    expected.entries[0].attempts = 1
    expected.sending = .inFlight(request(7), mutations: [MutationID(1)], failures: 0, deadline: deadline)
    #expect(outbox == expected)
    #expect(!outbox.canSend(now: t0))
    #expect(outbox.requestInFlight == request(7))
    #expect(outbox.nextWakeUp == deadline)
  }

  @Test("an acknowledgement keeps the entry with its receipt until the finger shows it")
  func acknowledgedThenConfirmed() {
    var outbox = savedOutbox("a")
    _ = outbox.send(request(1), now: t0, deadline: t0)
    var expected = outbox
    let wasOurs = outbox.acknowledged(request(1), receipt)
    #expect(wasOurs)
    expected.entries[0].receipt = receipt
    expected.sending = .ready(failures: 0)
    #expect(outbox == expected)
    #expect(!outbox.canSend(now: t0))
    outbox.confirm(by: EventFinger(queueID: "q", lastEventID: 3))
    #expect(outbox == expected)
    outbox.confirm(by: EventFinger(queueID: "q", lastEventID: 4))
    expected.entries = []
    #expect(outbox == expected)
  }

  /// The receipt lists the user's queues when the write was applied. One it does not list was usually
  /// registered after (its snapshot holds the write); but the queue the write was sent on existed before,
  /// so not listed it had ended, and the write waits for the next queue's snapshot.
  @Test("a receipt that does not list the queue the write was sent on keeps it until the machine holds another")
  func receiptWithoutTheSendingQueue() {
    var outbox = savedOutbox("a")
    _ = outbox.send(request(1), now: t0, deadline: t0, onQueue: "old")
    #expect(outbox.entries[0].sentOnQueue == "old")
    let expired = MutationReceipt(applied: true, eventsThrough: ["other-device": 9])
    let wasOurs = outbox.acknowledged(request(1), expired)
    #expect(wasOurs)
    outbox.confirm(by: EventFinger(queueID: "old", lastEventID: 100))
    #expect(outbox.entries.map(\.id) == [MutationID(1)], "retired while the screen still showed the old queue")
    outbox.confirm(by: EventFinger(queueID: "new", lastEventID: 0))
    #expect(outbox.entries.isEmpty)
    // Sent with no queue held: a queue it does not list was registered after it.
    var unqueued = savedOutbox("b")
    _ = unqueued.send(request(2), now: t0, deadline: t0)
    let unqueuedWasOurs = unqueued.acknowledged(request(2), expired)
    #expect(unqueuedWasOurs)
    unqueued.confirm(by: EventFinger(queueID: "old", lastEventID: 0))
    #expect(unqueued.entries.isEmpty)
  }

  @Test("an event whose origin is one of this client's writes retires it at once, even in flight")
  func retiredByOrigin() {
    var outbox = savedOutbox("a", "b")
    _ = outbox.send(request(1), now: t0, deadline: t0)
    var expected = outbox
    outbox.eventsApplied([MutationOrigin(clientID: "other", mutationID: MutationID(1))])
    #expect(outbox == expected)
    outbox.eventsApplied([MutationOrigin(clientID: client, mutationID: MutationID(1))])
    expected.entries.removeFirst()
    #expect(outbox == expected)
    let wasOurs = outbox.acknowledged(request(1), receipt)
    #expect(wasOurs)
    expected.sending = .ready(failures: 0)
    #expect(outbox == expected)
  }

  @Test("a transient failure waits for the given backoff and counts; a refusal moves the write to rejected")
  func failures() {
    var outbox = savedOutbox("a", "b")
    _ = outbox.send(request(1), now: t0, deadline: t0)
    var expected = outbox
    let retryAt = t0.advanced(by: .milliseconds(80))
    let transient = outbox.failed(request(1), .connectionFailed(), wait: .milliseconds(80), now: t0)
    #expect(transient == .willRetry(retryAt: retryAt))
    expected.sending = .waiting(failures: 1, retryAt: retryAt)
    #expect(outbox == expected)
    #expect(outbox.consecutiveFailures == 1)
    #expect(!outbox.canSend(now: t0) && outbox.canSend(now: retryAt))

    _ = outbox.send(request(2), now: retryAt, deadline: retryAt)
    let refusal = outbox.failed(request(2), .api(.badRequest("no")), wait: .zero, now: retryAt)
    #expect(refusal == .rejected(MutationID(1)))
    expected.entries.removeFirst()
    expected.rejected = [RejectedMutation(id: MutationID(1), mutation: "a", reason: "no")]
    expected.sending = .ready(failures: 0)
    #expect(outbox == expected)
    let lateAnswer = outbox.failed(request(2), .timedOut, wait: .zero, now: retryAt)
    #expect(lateAnswer == .ignored)
  }

  @Test("MUTATION_ID_REUSED: a new client id renumbers every entry, and nothing goes until saved again")
  func reusedIDsTakeANewClientID() {
    var outbox = savedOutbox("a", "b", "c")
    _ = outbox.send(request(1), now: t0, deadline: t0)
    _ = outbox.acknowledged(request(1), receipt)
    _ = outbox.send(request(2), now: t0, deadline: t0)
    let reused = outbox.failed(request(2), .api(.mutationIDReused(MutationID(2))), wait: .zero, now: t0)
    #expect(reused == .needsNewClientID)
    outbox.adoptClientID("client-2")
    #expect(outbox.clientID == "client-2")
    #expect(outbox.entries.map(\.id) == [MutationID(1), MutationID(2), MutationID(3)])
    #expect(outbox.entries.map(\.mutation) == ["a", "b", "c"])
    #expect(outbox.entries.map(\.isAcknowledged) == [true, false, false])
    #expect(outbox.nextMutationID == MutationID(4))
    #expect(!outbox.canSend(now: t0))
    outbox.saved(clientID: "client-2", nextMutationID: MutationID(4))
    let resent = outbox.send(request(3), now: t0, deadline: t0)
    #expect(resent?.requests.map(\.mutationID) == [MutationID(2)])
  }

  @Test("a request past its deadline is reported for cancelling; abandoning keeps the failure count")
  func deadlines() {
    var outbox = savedOutbox("a")
    let deadline = t0.advanced(by: .seconds(30))
    _ = outbox.send(request(1), now: t0, deadline: deadline)
    #expect(outbox.timedOutRequest(now: deadline.advanced(by: .milliseconds(-1))) == nil)
    #expect(outbox.timedOutRequest(now: deadline) == request(1))
    #expect(outbox.abandonInFlight() == request(1))
    #expect(outbox.canSend(now: t0))
  }

  @Test("retryNow ends a wait; dismissing rejections forgets them up to an id")
  func retryNowAndDismiss() {
    var outbox = savedOutbox("a", "b")
    _ = outbox.send(request(1), now: t0, deadline: t0)
    _ = outbox.failed(request(1), .connectionFailed(), wait: .seconds(9), now: t0)
    outbox.retryNow()
    #expect(outbox.sending == .ready(failures: 0))
    _ = outbox.send(request(2), now: t0, deadline: t0)
    _ = outbox.failed(request(2), .api(.badRequest("no")), wait: .zero, now: t0)
    #expect(outbox.rejected.map(\.id) == [MutationID(1)])
    let forgotNothing = !outbox.dismissRejections(through: MutationID(0))
    #expect(forgotNothing)
    let forgot = outbox.dismissRejections(through: MutationID(1))
    #expect(forgot)
    #expect(outbox.rejected.isEmpty)
  }

  @Test("a batch refused whole goes again one write at a time, so the refusal lands on the write that earned it")
  func refusedBatchIsolated() {
    var outbox = savedOutbox("a", "b", "c")
    #expect(outbox.send(request(1), now: t0, deadline: t0, maximumCount: 3)?.requests.count == 3)
    #expect(
      outbox.failed(request(1), .api(.badRequest("unreadable")), wait: .seconds(1), now: t0) == .willRetry(retryAt: t0)
    )
    #expect(outbox.rejected.isEmpty)
    let single = outbox.send(request(2), now: t0, deadline: t0, maximumCount: 3)
    #expect(single?.requests.map(\.mutation) == ["a"])
    let answer = outbox.answered(
      request(2),
      [.refused(MutationID(1), .badRequest("unreadable"))],
      failureWait: .seconds(1),
      now: t0
    )
    #expect(answer?.rejected == [MutationID(1)])
    #expect(outbox.rejected.map(\.mutation) == ["a"])
    #expect(outbox.send(request(3), now: t0, deadline: t0, maximumCount: 3)?.requests.map(\.mutation) == ["b", "c"])
  }

  @Test("an answer deciding nothing it was asked counts as a failure and waits for the backoff")
  func emptyAnswerIsAFailure() {
    var outbox = savedOutbox("a", "b")
    _ = outbox.send(request(1), now: t0, deadline: t0, maximumCount: 2)
    let wrong = MutationOutcome.acknowledged(MutationID(9), MutationReceipt(applied: true, eventsThrough: [:]))
    let answer = outbox.answered(request(1), [wrong], failureWait: .seconds(2), now: t0)
    #expect(answer?.isFailure == true)
    #expect(!outbox.canSend(now: t0))
    #expect(outbox.canSend(now: t0.advanced(by: .seconds(2))))
    #expect(outbox.entries.allSatisfy { !$0.isAcknowledged })
  }
}
