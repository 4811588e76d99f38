import EventProtocol
import EventServer
import Foundation
import SampleApps
import TestScheduling
import Testing
import UpdateMachineTesting

/// Notes posted for later: a scheduled note waits in its own table until its time, when the server's clock
/// reaches the application's deadline and the note is delivered in a transaction of its own.
struct ScheduledNotes: StoredApplication {
  typealias Snapshot = NoteSnapshot
  typealias Event = NoteEvent

  struct Command: Codable, Sendable, Equatable {
    var text: String
    var recipient: UserID
    /// When to deliver it, in whole seconds since the epoch.
    var at: Int64
  }

  /// Where to count the deadlines this instance runs, and the partition of the node it serves
  /// (`PartitionDeadlineTests`); `nil`: not counted.
  var counted: (runs: DeadlineRuns, partition: Int)?

  var migrations: [SchemaMigration] {
    StoredNoteBoard.schema + [
      SchemaMigration(
        version: 2,
        name: "scheduled",
        sqlite: [
          "CREATE TABLE scheduled (id INTEGER PRIMARY KEY, recipient TEXT NOT NULL, text TEXT NOT NULL, due INTEGER NOT NULL)",
          "CREATE INDEX scheduled_by_due ON scheduled (due)",
        ],
        postgres: [
          "CREATE TABLE scheduled (id bigserial PRIMARY KEY, recipient text NOT NULL, text text NOT NULL, due bigint NOT NULL)",
          "CREATE INDEX scheduled_by_due ON scheduled (due)",
        ]
      )
    ]
  }

  func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> NoteSnapshot {
    try await StoredNoteBoard().snapshot(for: user, in: transaction)
  }

  func handle(
    _ command: Command,
    from user: UserID,
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<NoteEvent>] {
    try await transaction.execute(
      "INSERT INTO scheduled (recipient, text, due) VALUES (?, ?, ?)",
      [.text(command.recipient.rawValue), .text(command.text), .integer(command.at)]
    )
    return []
  }

  func nextDeadline(in transaction: any DatabaseTransaction) async throws -> Timestamp? {
    let rows = try await transaction.execute("SELECT min(due) AS due FROM scheduled")
    return rows.first?["due"]?.integer.map { Timestamp(secondsSinceEpoch: $0) }
  }

  func deadlineReached(at now: Timestamp, in transaction: any DatabaseTransaction) async throws -> [Delivery<NoteEvent>]
  {
    if let counted { counted.runs.ran(on: counted.partition) }
    let seconds = Int64(now.sinceEpoch.components.seconds)
    let due = try await transaction.execute(
      "SELECT id, recipient, text FROM scheduled WHERE due <= ? ORDER BY due, id",
      [.integer(seconds)]
    )
    var deliveries: [Delivery<NoteEvent>] = []
    for row in due {
      guard let recipient = row["recipient"]?.text, let text = row["text"]?.text else { continue }
      try await transaction.execute(
        "INSERT INTO notes (recipient, text) VALUES (?, ?)",
        [.text(recipient), .text(text)]
      )
      deliveries.append(Delivery(to: [UserID(recipient)], event: .note(text: text)))
    }
    try await transaction.execute("DELETE FROM scheduled WHERE due <= ?", [.integer(seconds)])
    return deliveries
  }
}

@Suite(
  "A stored application's time-driven work: run when the clock reaches it, committed like a command",
  .serialized,
  .hangGuard
)
struct StoredDeadlineTests {
  typealias Server = EventServer<StoredRelay<ScheduledNotes>, ManualClock>

  /// Polls (parking when nothing is queued) until a note arrives; heartbeats are skipped.
  static func nextNote(_ server: Server, queueID: QueueID, after lastEventID: inout Int) async throws -> String {
    while true {
      let events = try await server.events(queueID: queueID, user: "alice", lastEventID: lastEventID)
      lastEventID = events.last?.id ?? lastEventID
      for envelope in events {
        if case .payload(.note(let text)) = envelope.body { return text }
      }
    }
  }

  @Test(
    "a scheduled note is delivered at its time, and one scheduled before a restart after it",
    arguments: StoredBackend.available
  )
  func scheduled(_ backend: StoredBackend) async throws {
    let database = try await backend.scratch()
    let clock = ManualClock()
    // The server's time is the manual clock's own (anchored to it, not to the wall clock), so the note's time is
    // in the server's future until the test advances the clock.
    let start = Int64(clock.now.sinceEpoch.components.seconds)
    var log = try await database.open()
    var server: Server = try await EventServer.serving(ScheduledNotes(), from: log, clock: clock, anchor: clock.now).0
    let alice = try await server.register(user: "alice")
    let command = ScheduledNotes.Command(text: "later", recipient: "alice", at: start + 60)
    _ = try await server.applyMutation(.request(command), from: "bob", clientID: "phone", mutationID: MutationID(1))
    var seen = -1
    let early = try await server.events(queueID: alice.queueID, user: "alice", lastEventID: -1, dontBlock: true)
    #expect(early.isEmpty, "\(early)")
    clock.advance(by: .seconds(61))
    #expect(try await Self.nextNote(server, queueID: alice.queueID, after: &seen) == "later")
    #expect(try await server.readStoredState { try await StoredNoteBoard.notes(of: "alice", in: $0) } == ["later"])

    // Scheduled, then the server stops before its time: the next start reads the deadline from the table.
    let again = ScheduledNotes.Command(text: "after the restart", recipient: "alice", at: start + 200)
    _ = try await server.applyMutation(.request(again), from: "bob", clientID: "phone", mutationID: MutationID(2))
    await server.shutdown()
    await server.waitForWrites()
    await database.close(log)
    log = try await database.open()
    server = try await EventServer.serving(ScheduledNotes(), from: log, clock: clock, anchor: clock.now).0
    clock.advance(by: .seconds(140))
    #expect(try await Self.nextNote(server, queueID: alice.queueID, after: &seen) == "after the restart")
    #expect(
      try await server.readStoredState { try await StoredNoteBoard.notes(of: "alice", in: $0) }
        == ["later", "after the restart"]
    )
    await server.shutdown()
    await server.waitForWrites()
    await database.close(log)
  }
}
