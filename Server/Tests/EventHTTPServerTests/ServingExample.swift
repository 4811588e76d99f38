// The example of docs/serving.md, compiled here; ServingExampleTests runs it and checks the document shows
// exactly this code.
// EXAMPLE-BEGIN
import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Logging

/// The one event and command: a card moved to a column (also what a device sends to move it).
struct CardMoved: EventPayload {
  static let knownEventTypes: Set<String> = ["card_moved"]
  var eventType: String { "card_moved" }
  var card: String
  var column: String
}

/// What a registration returns: every card's column.
struct Board: Codable, Sendable, Equatable {
  var columns: [String: String] = [:]
}

/// The server side of a team's kanban board: everyone sees every move.
struct KanbanServer: ServerApplication, Codable {
  var board = Board()
  var team: [UserID]

  func snapshot(for user: UserID) -> Board { board }

  mutating func handle(_ move: CardMoved, from user: UserID) throws(CommandRejection) -> [Delivery<CardMoved>] {
    guard !move.card.isEmpty, !move.column.isEmpty else { throw CommandRejection("name the card and the column") }
    board.columns[move.card] = move.column
    return [Delivery(to: team, event: move)]
  }
}

/// The HTTP server: events API, API keys, rate limits, durable state in `dataDirectory`.
func makeKanbanServer(port: Int, dataDirectory: URL) throws -> EventHTTPServer<KanbanServer> {
  var configuration = EventHTTPServerConfiguration(
    keys: try APIKeys(["alice": "alice-secret-key", "bob": "bob-secret-key"])
  )
  configuration.port = port
  configuration.dataDirectory = dataDirectory
  return EventHTTPServer(
    application: KanbanServer(team: ["alice", "bob"]),
    configuration: configuration,
    logger: Logger(label: "kanban")
  )
}
// EXAMPLE-END
