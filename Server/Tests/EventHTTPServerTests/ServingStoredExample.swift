// The stored example of docs/serving.md, compiled here; ServingStoredExampleTests runs it over HTTP and checks
// the document shows exactly this code.
import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Logging

// STORED-BEGIN
/// The kanban board with its cards in a table: the same wire (``Board``, ``CardMoved``) as the in-memory one.
struct StoredKanban: StoredApplication {
  var team: [UserID]

  var migrations: [SchemaMigration] {
    [
      SchemaMigration(
        version: 1,
        name: "cards",
        sqlite: ["CREATE TABLE cards (card TEXT PRIMARY KEY, lane TEXT NOT NULL)"],
        postgres: ["CREATE TABLE cards (card text PRIMARY KEY, lane text NOT NULL)"]
      )
    ]
  }

  func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> Board {
    let rows = try await transaction.execute("SELECT card, lane FROM cards")
    var board = Board()
    for row in rows {
      if let card = row["card"]?.text, let lane = row["lane"]?.text { board.columns[card] = lane }
    }
    return board
  }

  func handle(
    _ move: CardMoved,
    from user: UserID,
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<CardMoved>] {
    guard !move.card.isEmpty, !move.column.isEmpty else { throw CommandRejection("name the card and the column") }
    try await transaction.execute(
      "INSERT INTO cards (card, lane) VALUES (?, ?) ON CONFLICT (card) DO UPDATE SET lane = excluded.lane",
      [.text(move.card), .text(move.column)]
    )
    return [Delivery(to: team, event: move)]
  }
}

/// The HTTP server: the cards in SQLite in `dataDirectory` (or in PostgreSQL: pass `log:`).
func makeStoredKanbanServer(port: Int, dataDirectory: URL) throws -> EventHTTPServer<StoredRelay<StoredKanban>> {
  var configuration = EventHTTPServerConfiguration(
    keys: try APIKeys(["alice": "alice-secret-key", "bob": "bob-secret-key"])
  )
  configuration.port = port
  configuration.dataDirectory = dataDirectory
  return EventHTTPServer(
    storedApplication: StoredKanban(team: ["alice", "bob"]),
    configuration: configuration,
    logger: Logger(label: "kanban")
  )
}
// STORED-END
