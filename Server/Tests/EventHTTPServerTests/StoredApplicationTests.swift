import EventProtocol
import EventServer
import Foundation
import SampleApps
import TestScheduling
import Testing

/// A stored notes board whose post of "boom" writes its row, then fails in the database: the transaction
/// must roll back whole.
struct FailingStoredNoteBoard: StoredApplication {
  typealias Snapshot = NoteSnapshot
  typealias Event = NoteEvent
  typealias Command = NoteBoard.Command

  var migrations: [SchemaMigration] { StoredNoteBoard.schema }

  func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> NoteSnapshot {
    try await StoredNoteBoard().snapshot(for: user, in: transaction)
  }

  func handle(
    _ command: NoteBoard.Command,
    from user: UserID,
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<NoteEvent>] {
    let deliveries = try await StoredNoteBoard().handle(command, from: user, at: now, in: transaction)
    if case .post("boom", _) = command { try await transaction.execute("INSERT INTO no_such_table VALUES (1)") }
    return deliveries
  }
}

@Suite(
  "Stored applications: a command's rows, its events and its decision commit together, on SQLite and PostgreSQL",
  .serialized,
  .hangGuard
)
struct StoredApplicationTests {
  typealias Server = EventServer<StoredRelay<StoredNoteBoard>, ContinuousClock>

  static func serve(_ log: any TransactionalServerLog) async throws -> Server {
    try await EventServer.serving(StoredNoteBoard(), from: log, clock: ContinuousClock()).0
  }

  static func notes(of user: UserID, on server: Server) async throws -> [String] {
    try await server.readStoredState { try await StoredNoteBoard.notes(of: user, in: $0) }
  }

  static func texts(_ events: [EventEnvelope<NoteEvent>]) -> [String] {
    events.compactMap { envelope in
      if case .payload(.note(let text)) = envelope.body { text } else { nil }
    }
  }

  @Test(
    "exactly once, rejections remembered, a forged decision refused, and all of it survives a restart",
    arguments: StoredBackend.available
  )
  func exactlyOnceAcrossRestart(_ backend: StoredBackend) async throws {
    let database = try await backend.scratch()
    var log = try await database.open()
    var server = try await Self.serve(log)
    let alice = try await server.register(user: "alice")
    #expect(alice.snapshot == NoteSnapshot(notes: []))

    let post = StoredCommand<NoteBoard.Command, NoteEvent>.request(.post("hi", to: ["alice"]))
    let first = try await server.applyMutation(post, from: "bob", clientID: "phone", mutationID: MutationID(1))
    let again = try await server.applyMutation(post, from: "bob", clientID: "phone", mutationID: MutationID(1))
    #expect(first.applied && !again.applied)
    #expect(try await Self.notes(of: "alice", on: server) == ["hi"], "one row, not two")

    let forbidden = StoredCommand<NoteBoard.Command, NoteEvent>.request(.forbidden)
    for _ in 0..<2 {
      await #expect(throws: EventAPIError.self) {
        try await server.applyMutation(forbidden, from: "bob", clientID: "phone", mutationID: MutationID(2))
      }
    }
    let forged = StoredCommand<NoteBoard.Command, NoteEvent>.delivered([
      Delivery(to: ["alice"], event: .note(text: "forged"))
    ])
    await #expect(throws: EventAPIError.self) {
      try await server.applyMutation(forged, from: "mallory", clientID: "x", mutationID: MutationID(1))
    }
    let events = try await server.events(queueID: alice.queueID, user: "alice", lastEventID: -1, dontBlock: true)
    #expect(Self.texts(events) == ["hi"])
    let lastSeen = try #require(events.last?.id)

    // No snapshot: the restart replays every record, the stored decisions among them.
    await server.shutdown()
    await server.waitForWrites()
    await database.close(log)
    log = try await database.open()
    server = try await Self.serve(log)
    // The queue survived; the memory of decisions too (a repeat is not applied again, a rejection stays one).
    let repeated = try await server.applyMutation(post, from: "bob", clientID: "phone", mutationID: MutationID(1))
    #expect(!repeated.applied)
    await #expect(throws: EventAPIError.self) {
      try await server.applyMutation(forbidden, from: "bob", clientID: "phone", mutationID: MutationID(2))
    }
    _ = try await server.applyMutation(
      .request(.post("after", to: ["alice"])),
      from: "bob",
      clientID: "phone",
      mutationID: MutationID(3)
    )
    let resumed = try await server.events(queueID: alice.queueID, user: "alice", lastEventID: lastSeen, dontBlock: true)
    #expect(Self.texts(resumed) == ["after"], "the queue resumed after the restart with nothing lost")
    // docs/protocol.md, "Restart": the ids jump, and the restart event comes before what followed it.
    #expect(resumed.map(\.body).first == .restart, "no restart event: \(resumed.map(\.body))")
    #expect((resumed.first?.id ?? 0) >= lastSeen + (1 << 20), "no jump in ids: \(resumed.map(\.id))")
    #expect(try await Self.notes(of: "alice", on: server) == ["hi", "after"])
    let fresh = try await server.register(user: "alice")
    #expect(fresh.snapshot == NoteSnapshot(notes: ["hi", "after"]))
    await server.shutdown()
    await server.waitForWrites()
    await database.close(log)
  }

  @Test(
    "a command whose transaction fails midway leaves no row, no event and no decision",
    arguments: StoredBackend.available
  )
  func failingTransaction(_ backend: StoredBackend) async throws {
    let database = try await backend.scratch()
    let log = try await database.open()
    let server = try await EventServer.serving(FailingStoredNoteBoard(), from: log, clock: ContinuousClock()).0
    let alice = try await server.register(user: "alice")
    let position = await server.durablePosition
    await #expect(throws: ServerLogError.self) {
      try await server.applyMutation(
        .request(.post("boom", to: ["alice"])),
        from: "bob",
        clientID: "phone",
        mutationID: MutationID(1)
      )
    }
    #expect(await server.durablePosition == position, "nothing recorded")
    #expect(await server.logFailure == nil, "a refused statement is not a failed log")
    let events = try await server.events(queueID: alice.queueID, user: "alice", lastEventID: -1, dontBlock: true)
    #expect(events.isEmpty, "no event")
    #expect(try await server.readStoredState { try await StoredNoteBoard.notes(of: "alice", in: $0) } == [], "no row")
    // No decision either: the same mutation id is free for the write the client sends next.
    let receipt = try await server.applyMutation(
      .request(.post("fine", to: ["alice"])),
      from: "bob",
      clientID: "phone",
      mutationID: MutationID(1)
    )
    #expect(receipt.applied)
    #expect(try await server.readStoredState { try await StoredNoteBoard.notes(of: "alice", in: $0) } == ["fine"])
    await server.shutdown()
    await server.waitForWrites()
    await database.close(log)
  }

  @Test(
    "a fetched page is the page of the whole list, read with the index, atomic with the queue",
    arguments: StoredBackend.available
  )
  func fetchedPages(_ backend: StoredBackend) async throws {
    let database = try await backend.scratch()
    let log = try await database.open()
    let server = try await Self.serve(log)
    let alice = try await server.register(user: "alice")
    for index in 1...30 {
      let recipients: [UserID] = index % 3 == 0 ? ["bob"] : ["alice", "bob"]
      _ = try await server.applyMutation(
        .request(.post("n\(index)", to: recipients)),
        from: "carol",
        clientID: "web",
        mutationID: MutationID(UInt64(index))
      )
    }
    let all = try await server.readStoredState { transaction in
      try await transaction.execute("SELECT id, text FROM notes WHERE recipient = 'alice' ORDER BY id")
        .map { StoredNote(id: Int($0["id"]?.integer ?? 0), text: $0["text"]?.text ?? "") }
    }
    #expect(all.count == 20)
    var random = SeededRandomNumberGenerator(seed: 7)
    var anchors: [FetchAnchor] = [.oldest, .newest]
    for _ in 0..<20 { anchors.append(.position(Int.random(in: 0...(all.last!.id + 2), using: &random))) }
    for anchor in anchors {
      let request = FetchRequest(
        narrow: StoredNoteBoard.notesNarrow,
        anchor: anchor,
        before: Int.random(in: 0...6, using: &random),
        after: Int.random(in: 0...6, using: &random)
      )
      let answer = try await server.fetch(request, queueID: alice.queueID, user: "alice")
      #expect(answer.page == FetchPage.select(all, request: request, position: \.id), "\(request)")
      #expect(answer.lastEventID == 19, "atomic with the queue: its 20 events")
    }
    await #expect(throws: EventAPIError.self) {
      try await server.fetch(
        FetchRequest(narrow: Narrow([NarrowTerm("is", "other")]), anchor: .newest, before: 1, after: 0),
        queueID: alice.queueID,
        user: "alice"
      )
    }
    await server.shutdown()
    await server.waitForWrites()
    await database.close(log)
  }

  @Test(
    "on two PostgreSQL nodes: a write retried on the other node is not applied twice, and each node's queues hear it",
    .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)")
  )
  func exactlyOnceAcrossNodes() async throws {
    let database = try await StoredBackend.postgres.scratch()
    var logs: [any TransactionalServerLog] = []
    var nodes: [Server] = []
    for _ in 0..<2 {
      let log = try await database.open()
      logs.append(log)
      let shared = try #require(log as? any TransactionalSharedLog)
      nodes.append(try await EventServer.joining(StoredNoteBoard(), on: shared, clock: ContinuousClock()).0)
    }
    let alice = try await nodes[1].register(user: "alice")
    let post = StoredCommand<NoteBoard.Command, NoteEvent>.request(.post("once", to: ["alice"]))
    let first = try await nodes[0].applyMutation(post, from: "bob", clientID: "phone", mutationID: MutationID(1))
    let retried = try await nodes[1].applyMutation(post, from: "bob", clientID: "phone", mutationID: MutationID(1))
    #expect(first.applied && !retried.applied)
    #expect(try await Self.notes(of: "alice", on: nodes[1]) == ["once"], "one row")
    for node in nodes {
      let events = try await node.events(queueID: alice.queueID, user: "alice", lastEventID: -1, dontBlock: true)
      #expect(Self.texts(events) == ["once"], "any node answers the queue with the one event")
    }
    for node in nodes {
      await node.shutdown()
      await node.waitForWrites()
    }
    for log in logs { await database.close(log) }
  }
}
