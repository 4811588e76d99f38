import EventProtocol
import EventServer
import Foundation
import SampleApps
import TestScheduling
import Testing

/// Version 2 of the stored notes board: each note records who posted it (a column added with a default, so
/// the rows of version 1 stay valid). The wire is unchanged: clients of version 1 go on as they were.
struct StoredNoteBoardV2: StoredApplication {
  typealias Snapshot = NoteSnapshot
  typealias Event = NoteEvent
  typealias Command = NoteBoard.Command

  static let postedBy = SchemaMigration(
    version: 2,
    name: "notes.posted_by",
    sqlite: ["ALTER TABLE notes ADD COLUMN posted_by TEXT NOT NULL DEFAULT ''"],
    postgres: ["ALTER TABLE notes ADD COLUMN posted_by text NOT NULL DEFAULT ''"]
  )

  var migrations: [SchemaMigration] { StoredNoteBoard.schema + [Self.postedBy] }

  func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> NoteSnapshot {
    try await StoredNoteBoard().snapshot(for: user, in: transaction)
  }

  func handle(
    _ command: NoteBoard.Command,
    from user: UserID,
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<NoteEvent>] {
    guard case .post(let text, let recipients) = command else {
      return try await StoredNoteBoard().handle(command, from: user, at: now, in: transaction)
    }
    for recipient in Set(recipients).sorted() {
      try await transaction.execute(
        "INSERT INTO notes (recipient, text, posted_by) VALUES (?, ?, ?)",
        [.text(recipient.rawValue), .text(text), .text(user.rawValue)]
      )
    }
    return [Delivery(to: recipients, event: .note(text: text))]
  }
}

/// Version 2 with a migration that fails halfway: the start is refused and version 1 still serves.
struct BrokenStoredNoteBoardV2: StoredApplication {
  typealias Snapshot = NoteSnapshot
  typealias Event = NoteEvent
  typealias Command = NoteBoard.Command

  var migrations: [SchemaMigration] {
    StoredNoteBoard.schema + [
      SchemaMigration(
        version: 2,
        name: "notes.posted_by",
        sqlite: ["ALTER TABLE notes ADD COLUMN posted_by TEXT NOT NULL DEFAULT ''", "UPDATE no_such_table SET x = 1"],
        postgres: ["ALTER TABLE notes ADD COLUMN posted_by text NOT NULL DEFAULT ''", "UPDATE no_such_table SET x = 1"]
      )
    ]
  }

  func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> NoteSnapshot {
    try await StoredNoteBoard().snapshot(for: user, in: transaction)
  }

  func handle(
    _ command: NoteBoard.Command,
    from user: UserID,
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<NoteEvent>] {
    try await StoredNoteBoard().handle(command, from: user, at: now, in: transaction)
  }
}

@Suite(
  "Upgrading a stored application: version 2 migrates the tables and every client keeps its queue",
  .serialized,
  .hangGuard
)
struct StoredUpgradeTests {
  static func texts(_ events: [EventEnvelope<NoteEvent>]) -> [String] {
    events.compactMap { envelope in
      if case .payload(.note(let text)) = envelope.body { text } else { nil }
    }
  }

  @Test(
    "v1 writes, a failing v2 is refused with v1 intact, v2 migrates; every queue resumes with nothing lost",
    arguments: StoredBackend.available
  )
  func upgrade(_ backend: StoredBackend) async throws {
    let database = try await backend.scratch()
    // Version 1: two clients registered, notes posted and partly read.
    var log = try await database.open()
    let v1 = try await EventServer.serving(StoredNoteBoard(), from: log, clock: ContinuousClock()).0
    let alice = try await v1.register(user: "alice")
    let bob = try await v1.register(user: "bob")
    _ = try await v1.applyMutation(
      .request(.post("one", to: ["alice", "bob"])),
      from: "carol",
      clientID: "web",
      mutationID: MutationID(1)
    )
    let aliceSeen = try #require(
      try await v1.events(queueID: alice.queueID, user: "alice", lastEventID: -1, dontBlock: true).last?.id
    )
    _ = try await v1.applyMutation(
      .request(.post("two", to: ["bob"])),
      from: "carol",
      clientID: "web",
      mutationID: MutationID(2)
    )
    await v1.shutdown()
    try await v1.saveSnapshot()
    await database.close(log)

    // A version 2 whose migration fails: refused in one error, the database left at version 1.
    log = try await database.open()
    await #expect {
      _ = try await EventServer.serving(BrokenStoredNoteBoardV2(), from: log, clock: ContinuousClock())
    } throws: { error in
      (error as? MigrationError)?.kind == .failed
    }
    #expect(try await log.appliedMigrations().map(\.version) == [1])
    await database.close(log)

    // Version 2: migrated at start; both queues resume where their clients left them.
    log = try await database.open()
    let v2 = try await EventServer.serving(StoredNoteBoardV2(), from: log, clock: ContinuousClock()).0
    #expect(try await log.appliedMigrations().map(\.version) == [1, 2])
    _ = try await v2.applyMutation(
      .request(.post("three", to: ["alice", "bob"])),
      from: "carol",
      clientID: "web",
      mutationID: MutationID(3)
    )
    // A write version 1 decided is still remembered: its repeat is acknowledged, not applied again.
    let repeated = try await v2.applyMutation(
      .request(.post("two", to: ["bob"])),
      from: "carol",
      clientID: "web",
      mutationID: MutationID(2)
    )
    #expect(!repeated.applied)
    let aliceAfter = try await v2.events(queueID: alice.queueID, user: "alice", lastEventID: aliceSeen, dontBlock: true)
    let bobAll = try await v2.events(queueID: bob.queueID, user: "bob", lastEventID: -1, dontBlock: true)
    #expect(Self.texts(aliceAfter) == ["three"])
    #expect(Self.texts(bobAll) == ["one", "two", "three"])
    let postedBy = try await v2.readStoredState { transaction in
      try await transaction.execute("SELECT text, posted_by FROM notes WHERE recipient = ? ORDER BY id", [.text("bob")])
        .map { "\($0["text"]?.text ?? "?")/\($0["posted_by"]?.text ?? "?")" }
    }
    #expect(postedBy == ["one/", "two/", "three/carol"], "version 1's rows kept, with the column's default")
    await v2.shutdown()
    await v2.waitForWrites()
    await database.close(log)
  }

  @Test("docs/upgrading.md shows exactly the migration this test applies")
  func documentMatches() throws {
    let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let source = try String(contentsOf: folder.appendingPathComponent("StoredUpgradeTests.swift"), encoding: .utf8)
    let root = folder.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let page = try String(contentsOf: root.appendingPathComponent("docs/upgrading.md"), encoding: .utf8)
    let start = try #require(source.range(of: "  static let postedBy = SchemaMigration(\n"))
    let end = try #require(source.range(of: "\n  )\n", range: start.upperBound..<source.endIndex))
    // The page shows it at the left margin: the declaration's own indentation taken off.
    let body = source[start.upperBound..<end.lowerBound].split(separator: "\n").map { $0.dropFirst(2) }
    let shown = (["SchemaMigration("] + body + [")"]).joined(separator: "\n")
    #expect(page.contains(shown))
  }
}
