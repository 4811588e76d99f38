import EventProtocol
import Foundation
import SampleApps
import Testing

@testable import EventServer

/// No command from one user can drop, expire or fill another user's queue, and every field a user sends is
/// bounded (`docs/security.md`, "An authenticated user attacking others").
@Suite("cross-user harm")
struct CrossUserHarmTests {
  @Test("a mutation whose command is over the limit is refused before it is applied: the queue and the state stay")
  func oversizeCommandRefused() throws {
    var machine = makeMachine { $0.maximumCommandBytes = 100 }
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    #expect(machine.poll(PollID(1), queueID: queue, user: alice, lastEventID: -1, dontBlock: false, now: t0).isEmpty)
    let request = MutationRequest(
      clientID: "bob-phone",
      mutationID: MutationID(1),
      mutation: NoteBoard.Command.post(String(repeating: "x", count: 200), to: [alice])
    )
    #expect(throws: EventAPIError.self) { try machine.applyMutation(request, from: bob, now: t0) }
    #expect(machine.queue(queue) != nil)
    #expect(machine.parkedPollCount == 1)
    #expect(machine.application.notes[alice] == nil)
    #expect(machine.mutationMemory.records.isEmpty)
  }

  @Test(
    "an event over the event limit is queued all the same and counted: another user's queue is never dropped for it"
  )
  func oversizeEventKeepsQueue() throws {
    var machine = makeMachine { $0.maximumEventBytes = 100 }
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    #expect(machine.poll(PollID(1), queueID: queue, user: alice, lastEventID: -1, dontBlock: false, now: t0).isEmpty)
    let actions = try machine.handle(.post(String(repeating: "x", count: 200), to: [alice]), from: bob, now: t0)
    guard case .completePoll(PollID(1), .events(let events)) = actions.first else {
      Issue.record("the parked poll was not answered with the event: \(actions)")
      return
    }
    #expect(events.count == 1)
    #expect(machine.queue(queue) != nil)
    #expect(machine.oversizeEvents == 1)
  }

  @Test("a payload that encodes only inside its envelope is measured there: every receiving queue keeps it")
  func payloadMeasuredInEnvelope() throws {
    var machine = EventServerStateMachine(
      application: Pinger(),
      random: SeededRandomNumberGenerator(seed: 1),
      now: t0
    )
    #expect(throws: (any Error).self) { try WireFormat.encode(Ping()) }
    let queues = [alice, bob].map { machine.register(user: $0, eventTypes: nil, lifespan: nil, now: t0).0.queueID }
    _ = try machine.handle(.ping, from: alice, now: t0)
    for queue in queues {
      #expect(machine.queue(queue)?.events.count == 1)
    }
    #expect(machine.oversizeEvents == 0)
  }

  @Test("a reader who never acknowledges cannot stop a writer: writes to them and to others all go through")
  func idleReaderCannotFreezeWriter() throws {
    // As found: an idle user holds 32 queues; 157 events to them are 5,024 pending copies.
    var machine = makeMachine()
    let idle = (0..<32).map { _ in machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID }
    let carolQueue = machine.register(user: carol, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    for id: UInt64 in 1...157 {
      let request = MutationRequest(
        clientID: "b",
        mutationID: MutationID(id),
        mutation: NoteBoard.Command.post("n", to: [alice])
      )
      _ = try machine.applyMutation(request, from: bob, now: t0)
    }
    #expect(machine.pendingEvents(authoredBy: bob) == 157 * 32)
    for (id, to) in [(UInt64(158), carol), (159, alice)] {
      let request = MutationRequest(
        clientID: "b",
        mutationID: MutationID(id),
        mutation: NoteBoard.Command.post("n", to: [to])
      )
      #expect(try machine.applyMutation(request, from: bob, now: t0).0.applied)
    }
    #expect(machine.queue(carolQueue)?.events.count == 1)
    #expect(idle.allSatisfy { machine.queue($0)?.events.count == 158 })
  }

  @Test(
    "what a queue's owner leaves unread counts against the owner: the queue overflows and is dropped, the writer goes on"
  )
  func unreadQueueOverflowsOwner() throws {
    var machine = makeMachine { $0.maximumEventsPerQueue = 10 }
    let idle = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    let attentive = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    var acknowledged = -1
    for id: UInt64 in 1...25 {
      let request = MutationRequest(
        clientID: "b",
        mutationID: MutationID(id),
        mutation: NoteBoard.Command.post("n", to: [alice])
      )
      #expect(try machine.applyMutation(request, from: bob, now: t0).0.applied)
      // The attentive queue's client reads as events come.
      acknowledged = machine.queue(attentive)?.events.last?.id ?? acknowledged
      _ = machine.poll(PollID(id), queueID: attentive, user: alice, lastEventID: acknowledged, dontBlock: true, now: t0)
    }
    #expect(machine.queue(idle) == nil)
    #expect(machine.queue(attentive) != nil)
    let actions = machine.poll(PollID(99), queueID: idle, user: alice, lastEventID: -1, dontBlock: true, now: t0)
    #expect(actions == [.completePoll(PollID(99), .failed(.badEventQueueID(idle)))])
  }

  @Test("pending counts by author survive a snapshot, and a removed queue releases them")
  func authorCounts() throws {
    var machine = makeMachine()
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = machine.register(user: bob, eventTypes: nil, lifespan: nil, now: t0)
    for text in ["a", "b", "c", "d"] { _ = try machine.handle(.post(text, to: [alice, bob]), from: bob, now: t0) }
    #expect(machine.pendingEvents(authoredBy: bob) == 4)
    _ = machine.poll(PollID(1), queueID: queue, user: alice, lastEventID: 1, dontBlock: true, now: t0)
    #expect(machine.pendingEvents(authoredBy: bob) == 2)
    let encoded = try JSONEncoder().encode(machine.snapshot(position: 0))
    let restored = try Machine(
      snapshot: JSONDecoder().decode(ServerSnapshot<NoteBoard>.self, from: encoded),
      configuration: machine.configuration,
      random: SeededRandomNumberGenerator(seed: 1)
    )
    #expect(restored.pendingEvents(authoredBy: bob) == 2)
    _ = try machine.deleteQueue(queue, user: alice, now: t0)
    #expect(machine.pendingEvents(authoredBy: bob) == 0)
  }

  @Test("a restored queue counts each held event of another user once, even past a record naming no held event")
  func restoredForeignCounts() throws {
    var machine = makeMachine()
    _ = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0)
    for text in ["a", "b", "c"] { _ = try machine.handle(.post(text, to: [alice]), from: bob, now: t0) }
    #expect(machine.pendingEvents(authoredBy: bob) == 3)
    let queue = try #require(machine.dump().queues.first)
    // A hand-made dump: the middle event gone, its record of who queued it left behind.
    let edited = EventQueue(
      record: queue.record,
      events: queue.events.filter { $0.id != 1 },
      foreignEvents: queue.foreignEvents
    )
    var restored = makeMachine()
    _ = try restored.restore(QueueDump(queues: [edited]), now: t0)
    #expect(restored.pendingEvents(authoredBy: bob) == 2)
    #expect(restored.queue(queue.id)?.foreignEvents.map(\.id) == [0, 2])
  }

  @Test("mutation ids outside 1...2^53-1 are refused, as the spec says", arguments: [UInt64(0), 1 << 53, .max])
  func mutationIDBounds(id: UInt64) throws {
    var machine = makeMachine()
    let request = MutationRequest(
      clientID: "c",
      mutationID: MutationID(id),
      mutation: NoteBoard.Command.post("hi", to: [alice])
    )
    #expect(throws: EventAPIError.self) { try machine.applyMutation(request, from: alice, now: t0) }
    #expect(machine.application.notes.isEmpty)
  }

  @Test("push tokens are bounded in length and in installations per user; a replaced token takes no new place")
  func pushTokenBounds() throws {
    var machine = makeMachine { $0.maximumClientsPerUser = 3 }
    let long = PushToken(rawValue: String(repeating: "t", count: Machine.maximumPushTokenBytes + 1))
    #expect(throws: EventAPIError.self) { try machine.registerPushToken(long, user: alice, clientID: "c0", now: t0) }
    for index in 0..<3 {
      try machine.registerPushToken(
        PushToken(rawValue: "token-\(index)"),
        user: alice,
        clientID: ClientID(rawValue: "c\(index)"),
        now: t0
      )
    }
    try machine.registerPushToken("token-0-renewed", user: alice, clientID: "c0", now: t0)
    #expect(throws: EventAPIError.self) {
      try machine.registerPushToken("token-3", user: alice, clientID: "c3", now: t0)
    }
    #expect(machine.pushRegistry.installations(of: alice).count == 3)
    // Bob's place is his own.
    try machine.registerPushToken("bob-token", user: bob, clientID: "c0", now: t0)
    machine.pushTokenInvalid("token-1", now: t0)
    try machine.registerPushToken("token-3", user: alice, clientID: "c3", now: t0)
  }
}

/// An event whose own encoding writes nothing (a top-level encode throws), but which is fine inside its
/// envelope, beside `id` and `type`.
private struct Ping: EventPayload {
  static let knownEventTypes: Set<String> = ["ping"]
  var eventType: String { "ping" }
  init() {}
  init(from decoder: any Decoder) throws {}
  func encode(to encoder: any Encoder) throws {}
}

private struct Pinger: ServerApplication {
  enum Command: Codable, Sendable { case ping }
  func snapshot(for user: UserID) -> Int { 0 }
  mutating func handle(_ command: Command, from user: UserID) throws(CommandRejection) -> [Delivery<Ping>] {
    [Delivery(to: ["alice", "bob"], event: Ping())]
  }
}
