import EventProtocol
import Foundation
import SampleApps
import TestScheduling
import Testing
import UpdateMachineTesting

@testable import EventServer

private func note(_ id: Int, _ text: String) -> EventEnvelope<NoteEvent> {
  EventEnvelope(id: id, body: .payload(.note(text: text)))
}

@Suite("EventServer state machine")
struct EventServerStateMachineTests {
  // MARK: 1. Register

  @Test("register creates the queue and takes the snapshot in one step")
  func registerCreatesQueueAndSnapshot() throws {
    var machine = makeMachine()
    _ = try machine.handle(.post("before", to: [alice]), from: bob, now: t0)
    let (registration, actions) = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0)

    #expect(actions == [])
    #expect(
      registration
        == Registration(
          queueID: registration.queueID,
          lastEventID: -1,
          longPollTimeout: .seconds(90),
          snapshot: NoteSnapshot(notes: ["before"])
        )
    )
    let expectedQueue = EventQueue<NoteEvent>(
      id: registration.queueID,
      user: alice,
      clientID: nil,
      eventTypes: nil,
      idleTimeout: .seconds(600),
      now: t0
    )
    #expect(machine.queues == [registration.queueID: expectedQueue])
  }

  @Test("queue ids are 15 random characters of [0-9A-Za-z] (89 bits), stored inline, and never repeat")
  func queueIDsAreRandom() {
    var machine = makeMachine { $0.maximumQueuesPerUser = 10_000 }
    var seen: Set<QueueID> = []
    for _ in 0..<2_000 {
      let id = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
      #expect(id.rawValue.utf8.count == 15)
      #expect(
        id.rawValue.unicodeScalars.allSatisfy { $0.isASCII && $0.properties.isAlphabetic || ("0"..."9").contains($0) }
      )
      seen.insert(id)
    }
    #expect(seen.count == 2_000)
    // Every character of the alphabet turns up, so the ids use all 62 (not, say, only hex digits).
    #expect(Set(seen.flatMap(\.rawValue)).count == 62)
    var other = makeMachine(seed: 8)
    #expect(!seen.contains(other.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID))
  }

  @Test("a command's change and its events are atomic: a later snapshot holds it, the later queue does not")
  func commandIsAtomicWithDelivery() throws {
    var machine = makeMachine()
    let early = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0
    _ = try machine.handle(.post("hello", to: [alice]), from: bob, now: t0)
    let late = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0

    #expect(late.snapshot == NoteSnapshot(notes: ["hello"]))
    #expect(machine.queues[late.queueID]!.events == [])
    #expect(machine.queues[early.queueID]!.events == [note(0, "hello")])
    #expect(early.snapshot == NoteSnapshot(notes: []))
  }

  // MARK: 2. Ids and immutable values

  @Test("event ids start at 0 in each queue and strictly increase")
  func eventIDsPerQueue() throws {
    var machine = makeMachine()
    let first = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = try machine.handle(.post("a", to: [alice]), from: bob, now: t0)
    let second = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = try machine.handle(.post("b", to: [alice]), from: bob, now: t0)
    _ = try machine.handle(.post("c", to: [alice, alice]), from: bob, now: t0)

    #expect(machine.queues[first]!.events == [note(0, "a"), note(1, "b"), note(2, "c")])
    #expect(machine.queues[second]!.events == [note(0, "b"), note(1, "c")])
  }

  @Test("queues hold their own values: changing a delivered event touches no queue")
  func queuesHoldImmutableValues() throws {
    var machine = makeMachine()
    let a = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    let b = machine.register(user: bob, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = try machine.handle(.post("shared", to: [alice, bob]), from: bob, now: t0)
    let actions = machine.poll(PollID(1), queueID: a, user: alice, lastEventID: -1, dontBlock: true, now: t0)
    guard case .completePoll(_, .events(var delivered)) = actions.first else {
      Issue.record("expected a completed poll, got \(actions)")
      return
    }
    delivered[0].body = .payload(.note(text: "tampered"))
    #expect(machine.queues[a]!.events == [note(0, "shared")])
    #expect(machine.queues[b]!.events == [note(0, "shared")])
  }

  @Test("event-type filters apply to application events, never to heartbeats")
  func eventTypeFilter() throws {
    var machine = makeMachine()
    let notesOnly = machine.register(user: alice, eventTypes: ["note"], lifespan: nil, now: t0).0.queueID
    let nothing = machine.register(user: alice, eventTypes: [], lifespan: nil, now: t0).0.queueID
    _ = try machine.handle(.ping(to: [alice]), from: bob, now: t0)
    _ = try machine.handle(.post("x", to: [alice]), from: bob, now: t0)
    #expect(machine.queues[notesOnly]!.events == [note(0, "x")])
    #expect(machine.queues[nothing]!.events == [])

    _ = machine.poll(PollID(1), queueID: nothing, user: alice, lastEventID: -1, dontBlock: false, now: t0)
    let deadline = machine.queues[nothing]!.parkedPoll!.heartbeatAt
    let actions = machine.timerFired(now: deadline)
    #expect(actions == [.completePoll(PollID(1), .events([EventEnvelope(id: 0, body: .heartbeat)]))])
  }

  // MARK: 3. Validation, pruning, re-delivery

  @Test("unknown, expired and other users' queues get the identical BAD_EVENT_QUEUE_ID, changing nothing")
  func badEventQueueIDIsUniform() throws {
    var machine = makeMachine()
    let queueID = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = try machine.handle(.post("keep", to: [alice]), from: bob, now: t0)
    let before = machine.queues

    let foreign = machine.poll(PollID(1), queueID: queueID, user: bob, lastEventID: -1, dontBlock: true, now: t0)
    #expect(foreign == [.completePoll(PollID(1), .failed(.badEventQueueID(queueID)))])
    #expect(machine.queues == before)

    let unknown: QueueID = "no-such-queue"
    let missing = machine.poll(PollID(2), queueID: unknown, user: alice, lastEventID: -1, dontBlock: true, now: t0)
    #expect(missing == [.completePoll(PollID(2), .failed(.badEventQueueID(unknown)))])
    #expect(machine.queues == before)

    let later = t0.advanced(by: .seconds(600))
    let expired = machine.poll(PollID(3), queueID: queueID, user: alice, lastEventID: -1, dontBlock: true, now: later)
    #expect(expired == [.completePoll(PollID(3), .failed(.badEventQueueID(queueID)))])
    #expect(machine.queues == [:])
    #expect(
      try WireFormat.encode(EventAPIError.badEventQueueID(queueID))
        == WireFormat.encode(EventAPIError.badEventQueueID(queueID))
    )
  }

  @Test("an id older than the pruned mark, or never in the queue, is BAD_REQUEST and deletes nothing")
  func lastEventIDValidation() throws {
    var machine = makeMachine()
    let queueID = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    for text in ["a", "b", "c"] { _ = try machine.handle(.post(text, to: [alice]), from: bob, now: t0) }
    _ = machine.poll(PollID(1), queueID: queueID, user: alice, lastEventID: 0, dontBlock: true, now: t0)
    let before = machine.queues

    let cases: [(Int, EventAPIError)] = [
      (-1, .alreadyPruned(lastEventID: -1)),
      (-2, .notInQueue(lastEventID: -2)),
      (3, .notInQueue(lastEventID: 3)),
      (99, .notInQueue(lastEventID: 99)),
    ]
    for (offset, (lastEventID, error)) in cases.enumerated() {
      let pollID = PollID(UInt64(10 + offset))
      let actions = machine.poll(
        pollID,
        queueID: queueID,
        user: alice,
        lastEventID: lastEventID,
        dontBlock: true,
        now: t0
      )
      #expect(actions == [.completePoll(pollID, .failed(error))])
      #expect(machine.queues == before)
    }
  }

  @Test("a poll prunes through its id and returns all that remains; repeating it re-delivers")
  func pruneAndRedeliver() throws {
    var machine = makeMachine()
    let queueID = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    for text in ["a", "b", "c"] { _ = try machine.handle(.post(text, to: [alice]), from: bob, now: t0) }
    let later = t0.advanced(by: .seconds(5))

    let first = machine.poll(PollID(1), queueID: queueID, user: alice, lastEventID: 0, dontBlock: false, now: later)
    #expect(first == [.completePoll(PollID(1), .events([note(1, "b"), note(2, "c")]))])
    let again = machine.poll(PollID(2), queueID: queueID, user: alice, lastEventID: 0, dontBlock: false, now: later)
    #expect(again == first.map { _ in .completePoll(PollID(2), .events([note(1, "b"), note(2, "c")])) })

    let record = QueueRecord(
      id: queueID,
      user: alice,
      clientID: nil,
      eventTypes: nil,
      idleTimeout: .seconds(600),
      nextEventID: 3,
      prunedThrough: 0,
      lastContact: later,
      skippedIDs: []
    )
    let expected = EventQueue<NoteEvent>(
      record: record,
      events: [note(1, "b"), note(2, "c")],
      foreignEvents: [ForeignQueuedEvent(id: 1, author: bob), ForeignQueuedEvent(id: 2, author: bob)]
    )
    #expect(machine.queues[queueID] == expected)
  }

  // MARK: 4. Parking, heartbeats, displacement, cancellation

  @Test("with nothing pending a poll parks until an event, then gets the whole queue")
  func parkedPollWokenByEvent() throws {
    var machine = makeMachine()
    let queueID = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    #expect(machine.poll(PollID(1), queueID: queueID, user: alice, lastEventID: -1, dontBlock: false, now: t0) == [])
    let parked = try #require(machine.queues[queueID]!.parkedPoll)
    #expect(parked.pollID == PollID(1))
    #expect(machine.nextDeadline == parked.heartbeatAt)

    let later = t0.advanced(by: .seconds(3))
    let actions = try machine.handle(.post("hi", to: [alice, bob]), from: bob, now: later)
    #expect(actions == [.completePoll(PollID(1), .events([note(0, "hi")]))])
    #expect(machine.queues[queueID]!.parkedPoll == nil)
    // The queue's idle time counts from the poll's arrival; the client's next poll renews it.
    #expect(machine.queues[queueID]!.lastContact == t0)
    #expect(machine.nextDeadline == machine.nextSweepAt)
  }

  @Test("dontBlock answers at once with an empty batch")
  func dontBlockAnswersEmpty() {
    var machine = makeMachine()
    let queueID = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    let actions = machine.poll(PollID(1), queueID: queueID, user: alice, lastEventID: -1, dontBlock: true, now: t0)
    #expect(actions == [.completePoll(PollID(1), .events([]))])
    #expect(machine.queues[queueID]!.parkedPoll == nil)
  }

  @Test("a parked poll ends with a real heartbeat event 45 to 55 seconds later", .cpuBound, arguments: 0..<20)
  func heartbeatDeadline(seed: UInt64) {
    var machine = makeMachine(seed: seed)
    let queueID = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = machine.poll(PollID(1), queueID: queueID, user: alice, lastEventID: -1, dontBlock: false, now: t0)
    let deadline = machine.queues[queueID]!.parkedPoll!.heartbeatAt
    #expect(t0.duration(to: deadline) >= .seconds(45) && t0.duration(to: deadline) <= .seconds(55))

    let justBefore = deadline.advanced(by: .milliseconds(-1))
    #expect(machine.timerFired(now: justBefore) == [])
    #expect(machine.timerFired(now: deadline) == [.completePoll(PollID(1), .events([.init(id: 0, body: .heartbeat)]))])
    #expect(machine.queues[queueID]!.nextEventID == 1)
    let next = machine.poll(PollID(2), queueID: queueID, user: alice, lastEventID: 0, dontBlock: true, now: deadline)
    #expect(next == [.completePoll(PollID(2), .events([]))])
  }

  @Test("a second poll on the queue completes the first with the current contents")
  func secondPollDisplacesFirst() {
    var machine = makeMachine()
    let queueID = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = machine.poll(PollID(1), queueID: queueID, user: alice, lastEventID: -1, dontBlock: false, now: t0)
    let actions = machine.poll(PollID(2), queueID: queueID, user: alice, lastEventID: -1, dontBlock: false, now: t0)
    #expect(actions == [.completePoll(PollID(1), .events([]))])
    #expect(machine.queues[queueID]!.parkedPoll?.pollID == PollID(2))
  }

  @Test("a cancelled poll completes as cancelled and leaves every event queued")
  func cancelledPollKeepsEvents() throws {
    var machine = makeMachine()
    let queueID = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = machine.poll(PollID(1), queueID: queueID, user: alice, lastEventID: -1, dontBlock: false, now: t0)
    #expect(machine.pollCancelled(PollID(1), now: t0) == [.completePoll(PollID(1), .cancelled)])
    #expect(machine.pollCancelled(PollID(1), now: t0) == [])
    _ = try machine.handle(.post("kept", to: [alice]), from: bob, now: t0)
    #expect(machine.queues[queueID]!.events == [note(0, "kept")])
    let poll = machine.poll(PollID(2), queueID: queueID, user: alice, lastEventID: -1, dontBlock: false, now: t0)
    #expect(poll == [.completePoll(PollID(2), .events([note(0, "kept")]))])
  }

  // MARK: 5. Expiry

  @Test("idle timeout: default 600 s, lifespan 0 means default, capped at 7 days")
  func idleTimeouts() {
    var machine = makeMachine()
    let lifespans: [Duration?] = [nil, .zero, .seconds(30), .seconds(30 * 24 * 3600)]
    let timeouts: [Duration] = lifespans.map { lifespan in
      let queueID = machine.register(user: alice, eventTypes: nil, lifespan: lifespan, now: t0).0.queueID
      return machine.queues[queueID]!.idleTimeout
    }
    let expected: [Duration] = [.seconds(600), .seconds(600), .seconds(30), .seconds(7 * 24 * 3600)]
    #expect(timeouts == expected)
  }

  @Test("the sweep removes expired queues every 60 s and tells the application of a user's last queue")
  func sweepRemovesExpiredQueues() {
    var machine = makeMachine()
    let short = machine.register(user: alice, eventTypes: nil, lifespan: .seconds(100), now: t0).0.queueID
    let long = machine.register(user: alice, eventTypes: nil, lifespan: .seconds(1_000), now: t0).0.queueID
    let bobs = machine.register(user: bob, eventTypes: nil, lifespan: .seconds(100), now: t0).0.queueID

    #expect(machine.nextDeadline == t0.advanced(by: .seconds(60)))
    _ = machine.timerFired(now: t0.advanced(by: .seconds(60)))
    #expect(Set(machine.queues.keys) == [short, long, bobs])
    _ = machine.timerFired(now: t0.advanced(by: .seconds(120)))
    #expect(Set(machine.queues.keys) == [long])
    #expect(machine.application.usersWhoseLastQueueWentAway == [bob])
    #expect(machine.nextSweepAt == t0.advanced(by: .seconds(180)))
    _ = machine.timerFired(now: t0.advanced(by: .seconds(1_020)))
    #expect(machine.queues.isEmpty)
    #expect(machine.application.usersWhoseLastQueueWentAway == [bob, alice])
  }

  @Test("a queue with a parked poll never expires, and every request counts as contact")
  func contactKeepsQueuesAlive() throws {
    var machine = makeMachine {
      $0.heartbeatMinimum = .seconds(10_000)
      $0.heartbeatMaximum = .seconds(10_000)
    }
    let parked = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    let touched = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = machine.poll(PollID(1), queueID: parked, user: alice, lastEventID: -1, dontBlock: false, now: t0)
    let t500 = t0.advanced(by: .seconds(500))
    _ = machine.poll(PollID(2), queueID: touched, user: alice, lastEventID: -1, dontBlock: true, now: t500)
    _ = machine.timerFired(now: t0.advanced(by: .seconds(1_000)))
    #expect(Set(machine.queues.keys) == [parked, touched])
    _ = machine.timerFired(now: t500.advanced(by: .seconds(600)))
    #expect(Set(machine.queues.keys) == [parked])
  }

  // MARK: 6. Delete

  @Test("deleteQueue fails the parked poll with BAD_EVENT_QUEUE_ID and removes the queue")
  func deleteQueue() throws {
    var machine = makeMachine()
    let queueID = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = machine.poll(PollID(1), queueID: queueID, user: alice, lastEventID: -1, dontBlock: false, now: t0)
    #expect(throws: EventAPIError.badEventQueueID(queueID)) { try machine.deleteQueue(queueID, user: bob, now: t0) }
    #expect(machine.queues[queueID] != nil)

    let actions = try machine.deleteQueue(queueID, user: alice, now: t0)
    #expect(actions == [.completePoll(PollID(1), .failed(.badEventQueueID(queueID)))])
    #expect(machine.queues.isEmpty)
    #expect(machine.nextDeadline == machine.nextSweepAt)
    #expect(machine.application.usersWhoseLastQueueWentAway == [alice])
  }

  // MARK: 7. Bounded memory

  @Test("an overflowing queue is dropped; the others keep their events")
  func overflowingQueueIsDropped() throws {
    var machine = makeMachine { $0.maximumEventsPerQueue = 3 }
    let slow = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    let fast = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    for index in 0..<3 {
      _ = try machine.handle(.post("\(index)", to: [alice]), from: bob, now: t0)
      _ = machine.poll(PollID(UInt64(index)), queueID: fast, user: alice, lastEventID: index, dontBlock: true, now: t0)
    }
    #expect(machine.queues[slow]!.events.count == 3)
    _ = try machine.handle(.post("overflow", to: [alice]), from: bob, now: t0)
    #expect(machine.queues[slow] == nil)
    #expect(machine.queues[fast]!.events == [note(3, "overflow")])
    let poll = machine.poll(PollID(9), queueID: slow, user: alice, lastEventID: 2, dontBlock: true, now: t0)
    #expect(poll == [.completePoll(PollID(9), .failed(.badEventQueueID(slow)))])
  }

  @Test("a user over the queue cap loses their least recently used queue")
  func perUserQueueCapEvictsLeastRecentlyUsed() {
    var machine = makeMachine { $0.maximumQueuesPerUser = 3 }
    var ids: [QueueID] = []
    for second in 0..<3 {
      let now = t0.advanced(by: .seconds(Int64(second)))
      ids.append(machine.register(user: alice, eventTypes: nil, lifespan: nil, now: now).0.queueID)
    }
    _ = machine.poll(PollID(1), queueID: ids[0], user: alice, lastEventID: -1, dontBlock: true, now: t0 + .seconds(5))
    let bobs = machine.register(user: bob, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    let (newest, actions) = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0 + .seconds(6))
    #expect(actions == [])
    #expect(Set(machine.queues.keys) == [ids[0], ids[2], newest.queueID, bobs])
    #expect(machine.queueIDs(of: alice) == [ids[0], ids[2], newest.queueID])
  }

  // MARK: 8. Restart

  @Test("queues dump and load back, and each accepting queue gets a restart event")
  func dumpAndRestore() throws {
    var machine = makeMachine()
    let all = machine.register(user: alice, eventTypes: nil, lifespan: .seconds(120), now: t0).0.queueID
    let notesOnly = machine.register(user: bob, eventTypes: ["note"], lifespan: nil, now: t0).0.queueID
    for text in ["a", "b"] { _ = try machine.handle(.post(text, to: [alice, bob]), from: bob, now: t0) }
    _ = machine.poll(PollID(1), queueID: all, user: alice, lastEventID: 0, dontBlock: true, now: t0)
    let dump = machine.dump()
    let decoded = try JSONDecoder().decode(QueueDump<NoteEvent>.self, from: try WireFormat.encode(dump))
    #expect(decoded == dump)

    let restartedAt = t0.advanced(by: .seconds(3_600))
    var restarted = makeMachine(seed: 99)
    let actions = try restarted.restore(decoded, now: restartedAt)
    #expect(actions == [])
    var expectedAll = machine.queues[all]!
    expectedAll.lastContact = restartedAt
    expectedAll = expectedAll.appending(.restart)
    var expectedNotesOnly = machine.queues[notesOnly]!
    expectedNotesOnly.lastContact = restartedAt
    #expect(restarted.queues == [all: expectedAll, notesOnly: expectedNotesOnly])
    let poll = restarted.poll(PollID(1), queueID: all, user: alice, lastEventID: 0, dontBlock: true, now: restartedAt)
    #expect(poll == [.completePoll(PollID(1), .events([note(1, "b"), EventEnvelope(id: 2, body: .restart)]))])
  }

  @Test("an inconsistent dump is refused and changes nothing")
  func inconsistentDumpRefused() throws {
    var machine = makeMachine()
    let queueID = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = try machine.handle(.post("a", to: [alice]), from: bob, now: t0)
    var newer = machine.dump()
    newer.version = QueueDump<NoteEvent>.currentVersion + 1
    var duplicated = machine.dump()
    duplicated.queues.append(duplicated.queues[0])
    let before = machine.queues
    for bad in [newer, duplicated] {
      #expect(throws: QueueDumpError.self) { _ = try machine.restore(bad, now: t0) }
      #expect(machine.queues == before)
    }
    #expect(machine.queues[queueID] != nil)
  }

  // MARK: 10. Errors

  @Test("a rejected command is BAD_REQUEST and changes nothing")
  func rejectedCommand() throws {
    var machine = makeMachine()
    let queueID = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    let before = (machine.queues, machine.application)
    #expect(throws: EventAPIError.badRequest("alice may not do that")) {
      _ = try machine.handle(.forbidden, from: alice, now: t0)
    }
    #expect(machine.queues == before.0 && machine.application == before.1)
    #expect(machine.queues[queueID]!.events.isEmpty)
  }
}

extension Timestamp {
  fileprivate static func + (lhs: Timestamp, rhs: Duration) -> Timestamp { lhs.advanced(by: rhs) }
}

extension EventQueue {
  /// This queue with `body` queued under its next id, as the server queues one of its own events.
  fileprivate func appending(_ body: EventBody<Event>) -> EventQueue {
    var record = record
    let id = record.assignEventID()
    return EventQueue(
      record: record,
      events: events + [EventEnvelope(id: id, body: body)],
      foreignEvents: foreignEvents
    )
  }
}
