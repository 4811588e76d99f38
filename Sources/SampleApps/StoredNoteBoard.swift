import EventProtocol
import EventServer

/// The notes board as a ``StoredApplication``: the same commands, events and snapshots as ``NoteBoard``
/// (clients cannot tell them apart), with each note a row of the `notes` table, in the database that holds
/// the server's log.
///
/// `event-server --app notes` serves it on SQLite (`--data-dir`) or PostgreSQL (`--postgres`); tests and the
/// simulation keep the in-memory ``NoteBoard``.
///
/// ```swift
/// let log = try await SQLiteServerLog.open(path: "data/event-server.sqlite")
/// let (server, _) = try await EventServer.serving(StoredNoteBoard(), from: log, clock: ContinuousClock())
/// ```
public struct StoredNoteBoard: StoredApplication {
  public typealias Snapshot = NoteSnapshot
  public typealias Event = NoteEvent
  public typealias Command = NoteBoard.Command

  /// The board's schema: one row per note received, indexed by recipient.
  public static let schema: [SchemaMigration] = [
    SchemaMigration(
      version: 1,
      name: "notes",
      sqlite: [
        "CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT, recipient TEXT NOT NULL, text TEXT NOT NULL)",
        "CREATE INDEX notes_by_recipient ON notes (recipient, id)",
      ],
      postgres: [
        "CREATE TABLE notes (id bigserial PRIMARY KEY, recipient text NOT NULL, text text NOT NULL)",
        "CREATE INDEX notes_by_recipient ON notes (recipient, id)",
      ]
    )
  ]

  public init() {}

  public var migrations: [SchemaMigration] { Self.schema }

  public func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> NoteSnapshot {
    let rows = try await transaction.execute(
      "SELECT text FROM notes WHERE recipient = ? ORDER BY id",
      [.text(user.rawValue)]
    )
    return NoteSnapshot(notes: rows.compactMap { $0["text"]?.text })
  }

  public func handle(
    _ command: NoteBoard.Command,
    from user: UserID,
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<NoteEvent>] {
    switch command {
    case .post(let text, let recipients):
      // One row per distinct recipient, in a stable order (the in-memory board appends once per recipient).
      for recipient in Set(recipients).sorted() {
        try await transaction.execute(
          "INSERT INTO notes (recipient, text) VALUES (?, ?)",
          [.text(recipient.rawValue), .text(text)]
        )
      }
      return [Delivery(to: recipients, event: .note(text: text))]
    case .ping(let recipients):
      return [Delivery(to: recipients, event: .ping)]
    case .forbidden:
      throw CommandRejection("\(user) may not do that")
    }
  }

  /// Every note `user` received, read in `transaction`, oldest first: the truth a test compares clients with.
  public static func notes(
    of user: UserID,
    in transaction: any DatabaseTransaction
  ) async throws -> [String] {
    try await StoredNoteBoard().snapshot(for: user, in: transaction).notes
  }
}
