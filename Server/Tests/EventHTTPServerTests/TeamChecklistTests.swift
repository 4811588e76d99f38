import EventProtocol
import EventServer
import Foundation
import SampleApps
import TestScheduling
import Testing
import UpdateMachine

/// The team checklist (`event-server --app checklist`), the workload of a team app: items, each member's
/// count of writes and a log of writes in tables, every write delivered to the whole team.
@Suite(
  "The team checklist: every write reaches the whole team, and each member's copy equals the tables",
  .serialized,
  .hangGuard
)
struct TeamChecklistTests {
  typealias Server = EventServer<StoredRelay<TeamChecklist>, ContinuousClock>
  typealias Command = StoredRelay<TeamChecklist>.Command

  static let team: [UserID] = (1...6).map { UserID("t1/u\($0)") }
  static let stranger: UserID = "t2/u1"

  /// `member`'s copy: its registration's snapshot with every event of its queue applied, as a client does.
  static func copy(
    of member: UserID,
    from registration: Registration<ChecklistSnapshot?>,
    on server: Server
  ) async throws -> ChecklistSnapshot {
    var state = try #require(registration.snapshot)
    let reducer = ChecklistReducer(user: member)
    var last = registration.lastEventID
    while true {
      let events = try await server.events(
        queueID: registration.queueID,
        user: member,
        lastEventID: last,
        dontBlock: true
      )
      guard let newest = events.last?.id else { return state }
      for case .payload(let change) in events.map(\.body) { try reducer.apply(change, to: &state) }
      last = newest
    }
  }

  @Test(
    "six members join and write in batches: each copy equals the tables, counts equal the log, others' items refused",
    arguments: StoredBackend.available
  )
  func teamWrites(_ backend: StoredBackend) async throws {
    let database = try await backend.scratch()
    let log = try await database.open()
    let server = try await EventServer.serving(TeamChecklist(), from: log, clock: ContinuousClock()).0
    var registrations: [UserID: Registration<ChecklistSnapshot?>] = [:]
    for member in Self.team {
      _ = try await server.applyMutation(.request(.join), from: member, clientID: "phone", mutationID: MutationID(1))
      registrations[member] = try await server.register(user: member)
    }
    // Each member adds four items in one batch (decided together), the first member's repeated.
    for member in Self.team {
      let batch = MutationBatch<Command>(
        requests: (0..<4).map { index in
          MutationRequest(
            clientID: "phone",
            mutationID: MutationID(UInt64(2 + index)),
            mutation: .request(.add(title: "\(member) \(index)"))
          )
        }
      )
      let outcomes = try await server.applyMutations(batch, from: member)
      #expect(outcomes.allSatisfy { if case .acknowledged(_, let receipt) = $0 { receipt.applied } else { false } })
      if member == Self.team[0] {
        let again = try await server.applyMutations(batch, from: member)
        #expect(again.allSatisfy { if case .acknowledged(_, let receipt) = $0 { !receipt.applied } else { false } })
      }
    }
    // Another team's item cannot be checked from this team; one of this team's can.
    _ = try await server.applyMutation(
      .request(.add(title: "theirs")),
      from: Self.stranger,
      clientID: "phone",
      mutationID: MutationID(1)
    )
    let theirs = try await server.readStoredState { try await TeamChecklist.checklist(of: "t2", in: $0) }
    let theirID = try #require(theirs.items.first?.id)
    await #expect(throws: EventAPIError.self) {
      try await server.applyMutation(
        .request(.check(item: theirID, done: true)),
        from: Self.team[1],
        clientID: "phone",
        mutationID: MutationID(6)
      )
    }
    let tables = try await server.readStoredState { try await TeamChecklist.checklist(of: "t1", in: $0) }
    _ = try await server.applyMutation(
      .request(.check(item: tables.items[0].id, done: true)),
      from: Self.team[2],
      clientID: "phone",
      mutationID: MutationID(6)
    )

    let truth = try await server.readStoredState { try await TeamChecklist.checklist(of: "t1", in: $0) }
    #expect(truth.items.count == 24)
    #expect(truth.items[0].done)
    let counts = Self.team.map { ($0.rawValue, $0 == Self.team[2] ? 5 : 4) }
    #expect(truth.writes == Dictionary(uniqueKeysWithValues: counts))
    let logged = try await server.readStoredState { try await TeamChecklist.loggedWrites(of: "t1", in: $0) }
    #expect(logged == truth.writes, "one logged write per counted write: none applied twice, none lost")
    for member in Self.team {
      let copy = try await Self.copy(of: member, from: try #require(registrations[member]), on: server)
      #expect(copy == truth, "\(member)'s copy")
    }
    let stranger = try await server.readStoredState { try await TeamChecklist.checklist(of: "t2", in: $0) }
    #expect(stranger == ChecklistSnapshot(items: [ChecklistItem(id: theirID, title: "theirs")], writes: ["t2/u1": 1]))

    await server.shutdown()
    await server.waitForWrites()
    await database.close(log)
  }

  @Test(
    "a device registered before its user joined: an empty snapshot, then the join brings the whole checklist",
    arguments: StoredBackend.available
  )
  func registeredBeforeJoining(_ backend: StoredBackend) async throws {
    let database = try await backend.scratch()
    let log = try await database.open()
    let server = try await EventServer.serving(TeamChecklist(), from: log, clock: ContinuousClock()).0
    let (member, newcomer) = (Self.team[0], Self.team[1])
    /// `member` adds an item, as its `number`-th write.
    func add(_ title: String, _ number: UInt64) async throws {
      _ = try await server.applyMutation(
        .request(.add(title: title)),
        from: member,
        clientID: "phone",
        mutationID: MutationID(number)
      )
    }
    try await add("first", 1)
    let early = try await server.register(user: newcomer)
    #expect(early.snapshot == ChecklistSnapshot(), "a user who has not joined sees nothing yet")
    // A write the newcomer's queue cannot hear (not a member yet), then the newcomer's join.
    try await add("second", 2)
    _ = try await server.applyMutation(.request(.join), from: newcomer, clientID: "tablet", mutationID: MutationID(1))
    try await add("third", 3)

    let truth = try await server.readStoredState { try await TeamChecklist.checklist(of: "t1", in: $0) }
    #expect(truth.items.map(\.title) == ["first", "second", "third"])
    #expect(try await Self.copy(of: newcomer, from: early, on: server) == truth, "the copy registered before the join")
    let member1 = try await server.register(user: member)
    #expect(try await Self.copy(of: member, from: member1, on: server) == truth)

    await server.shutdown()
    await server.waitForWrites()
    await database.close(log)
  }

  @Test("a team shares one partition key, and a user without a team is a team of their own")
  func partitionKey() {
    let checklist = TeamChecklist()
    #expect(Set(Self.team.map(checklist.partitionKey(for:))) == ["t1"])
    #expect(checklist.partitionKey(for: "alice") == "alice")
  }
}
