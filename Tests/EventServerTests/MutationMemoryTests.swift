import EventProtocol
import Foundation
import SampleApps
import Testing

@testable import EventServer

private let phone: ClientID = "phone"

extension Machine {
  /// Applies a post from alice's `client` as mutation `id`, digesting it as a shell would.
  fileprivate mutating func post(
    _ text: String,
    id: UInt64,
    client: ClientID = phone,
    at now: Timestamp = t0
  ) throws(EventAPIError) -> MutationReceipt {
    let command = NoteBoard.Command.post(text, to: [alice, bob])
    return try applyMutation(
      command,
      from: alice,
      clientID: client,
      mutationID: MutationID(id),
      digest: MutationDigest(of: command),
      now: now
    ).0
  }
}

@Suite("EventServer: mutations applied at most once, reused ids refused, memory bounded")
struct MutationMemoryTests {
  @Test("a repeat of the same write is acknowledged again and applies nothing")
  func repeatIsAcknowledged() throws {
    var machine = makeMachine()
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    #expect(try machine.post("hi", id: 1) == MutationReceipt(applied: true, eventsThrough: [queue: 0]))
    let before = machine
    #expect(try machine.post("hi", id: 1) == MutationReceipt(applied: false, eventsThrough: [queue: 0]))
    #expect(machine.application == before.application)
    #expect(machine.queues == before.queues)
  }

  @Test("the same id with a different write is refused with MUTATION_ID_REUSED and changes nothing")
  func reusedIDRefused() throws {
    var machine = makeMachine()
    _ = try machine.post("first", id: 1)
    let before = machine
    #expect(throws: EventAPIError.mutationIDReused(MutationID(1))) { try machine.post("second", id: 1) }
    #expect(machine.application == before.application)
    #expect(machine.mutationMemory == before.mutationMemory)
  }

  @Test("ids going backwards: a remembered repeat is a repeat, a different write or one past the window is refused")
  func idsGoingBackwards() throws {
    var machine = makeMachine { $0.mutationWindow = 3 }
    for id in 1...5 { _ = try machine.post("n\(id)", id: UInt64(id)) }
    #expect(try machine.post("n3", id: 3).applied == false)
    #expect(throws: EventAPIError.mutationIDReused(MutationID(3))) { try machine.post("other", id: 3) }
    #expect(throws: EventAPIError.mutationIDReused(MutationID(2))) { try machine.post("n2", id: 2) }
    #expect(machine.application.notes[alice] == ["n1", "n2", "n3", "n4", "n5"])
  }

  @Test("a refused write is refused again on every repeat")
  func rejectionRepeats() throws {
    var machine = makeMachine()
    let forbidden = NoteBoard.Command.forbidden
    for _ in 0..<2 {
      #expect(throws: EventAPIError.badRequest("alice may not do that")) {
        _ = try machine.applyMutation(
          forbidden,
          from: alice,
          clientID: phone,
          mutationID: MutationID(1),
          digest: MutationDigest(of: forbidden),
          now: t0
        )
      }
    }
  }

  @Test("events carry their origin in the sender's own queues only")
  func originOnlyForTheSender() throws {
    var machine = makeMachine()
    let mine = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    let theirs = machine.register(user: bob, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = try machine.post("hi", id: 7)
    #expect(machine.queues[mine]?.events.map(\.origin) == [MutationOrigin(clientID: phone, mutationID: MutationID(7))])
    #expect(machine.queues[theirs]?.events.map(\.origin) == [nil])
    _ = try machine.handle(.post("plain", to: [alice]), from: bob, now: t0)
    #expect(machine.queues[mine]?.events.last?.origin == nil)
  }

  @Test("a client id that is empty or longer than 64 bytes is refused")
  func clientIDLength() throws {
    var machine = makeMachine()
    let long = ClientID(rawValue: String(repeating: "x", count: ClientID.maximumLength + 1))
    #expect(throws: EventAPIError.self) { try machine.post("a", id: 1, client: long) }
    #expect(throws: EventAPIError.self) { try machine.post("a", id: 1, client: "") }
    #expect(machine.mutationMemory.clientCount == 0)
    _ = try machine.post("a", id: 1, client: ClientID(rawValue: String(repeating: "x", count: ClientID.maximumLength)))
    #expect(machine.mutationMemory.clientCount == 1)
  }

  @Test("a client silent for longer than the memory lifetime is forgotten by the sweep; a repeat keeps it alive")
  func memoryExpires() throws {
    var machine = makeMachine { $0.mutationMemoryLifetime = .seconds(3600) }
    _ = try machine.post("a", id: 1, client: "quiet")
    _ = try machine.post("b", id: 1, client: "chatty")
    _ = try machine.post("b", id: 1, client: "chatty", at: t0.advanced(by: .seconds(3000)))
    _ = machine.timerFired(now: t0.advanced(by: .seconds(3660)))
    let remembered = machine.mutationMemory.records.map(\.source.clientID)
    #expect(remembered == ["chatty"])
  }

  @Test("each user keeps at most the configured number of clients, forgetting the least recently seen")
  func clientsPerUserBounded() throws {
    var machine = makeMachine { $0.maximumClientsPerUser = 3 }
    for index in 0..<5 {
      _ = try machine.post(
        "n\(index)",
        id: 1,
        client: ClientID(rawValue: "c\(index)"),
        at: t0.advanced(by: .seconds(Int64(index)))
      )
    }
    #expect(machine.mutationMemory.records.map(\.source.clientID) == ["c2", "c3", "c4"])
  }

  @Test("the memory survives a dump, and a version-1 dump (last decision only) still loads")
  func dumps() throws {
    var machine = makeMachine()
    _ = try machine.post("a", id: 1)
    let dump = try QueueDump<NoteEvent>.decode(WireFormat.encode(machine.dump()))
    var restarted = makeMachine()
    _ = try restarted.restore(dump, now: t0)
    #expect(restarted.mutationMemory == machine.mutationMemory)
    #expect(throws: EventAPIError.mutationIDReused(MutationID(1))) { try restarted.post("b", id: 1) }

    let versionOne = #"""
      {"version": 1, "queues": [], "mutations": [
        {"source": {"user": "alice", "clientID": "phone"}, "decision": {"mutationID": 4}}]}
      """#
    let old = try QueueDump<NoteEvent>.decode(Data(versionOne.utf8))
    var upgraded = makeMachine()
    _ = try upgraded.restore(old, now: t0)
    #expect(try upgraded.post("anything", id: 4).applied == false)
    #expect(try upgraded.post("new", id: 5).applied == true)
  }

  @Test(
    "a dump with a next event id at Int.max or Int.min is refused with the typed error",
    arguments: [Int.max, Int.min]
  )
  func extremeEventIDs(nextEventID: Int) throws {
    let text = """
      {"version": 2, "mutations": [], "queues": [{"id": "q", "user": "alice", "idleTimeout": [600, 0],
       "nextEventID": \(nextEventID), "prunedThrough": -1, "events": [], "lastContact": {"sinceEpoch": [0, 0]}}]}
      """
    #expect {
      _ = try QueueDump<NoteEvent>.decode(Data(text.utf8))
    } throws: { error in
      (error as? QueueDumpError)?.isSameKind(as: .corrupt("")) == true
    }
  }
}

@Suite("EventServer: bounded polls")
struct BoundedPollTests {
  @Test("a poll with a limit answers at most that many events, oldest first; the next poll continues from there")
  func limit() throws {
    var machine = makeMachine()
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    for index in 0..<5 { _ = try machine.handle(.post("n\(index)", to: [alice]), from: bob, now: t0) }
    let first = machine.poll(
      PollID(1),
      queueID: queue,
      user: alice,
      lastEventID: -1,
      dontBlock: true,
      limit: 2,
      now: t0
    )
    #expect(
      first.compactMap { if case .completePoll(_, .events(let events)) = $0 { events.map(\.id) } else { nil } } == [
        [0, 1]
      ]
    )
    let second = machine.poll(
      PollID(2),
      queueID: queue,
      user: alice,
      lastEventID: 1,
      dontBlock: false,
      limit: 2,
      now: t0
    )
    #expect(
      second.compactMap { if case .completePoll(_, .events(let events)) = $0 { events.map(\.id) } else { nil } } == [
        [2, 3]
      ]
    )
    let all = machine.poll(PollID(3), queueID: queue, user: alice, lastEventID: 3, dontBlock: true, now: t0)
    #expect(
      all.compactMap { if case .completePoll(_, .events(let events)) = $0 { events.map(\.id) } else { nil } } == [[4]]
    )
  }

  @Test("a parked poll with a limit is woken with at most that many events")
  func parkedLimit() throws {
    var machine = makeMachine()
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    #expect(
      machine.poll(PollID(1), queueID: queue, user: alice, lastEventID: -1, dontBlock: false, limit: 1, now: t0).isEmpty
    )
    let actions = try machine.handle(.post("one", to: [alice]), from: bob, now: t0)
    #expect(
      actions.compactMap { if case .completePoll(_, .events(let events)) = $0 { events.count } else { nil } } == [1]
    )
  }
}
