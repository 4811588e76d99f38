import Foundation
import Logging
import PostgresNIO

/// Databases the bench creates beside the one it was given (a log's partition count is fixed when it is
/// created, so each partitioned configuration needs a database of its own).
enum ScratchDatabase {
  /// `url` with its database replaced by `database`.
  static func url(_ url: String, database: String) -> String {
    url.replacingOccurrences(of: #"/[^/?]*(\?|$)"#, with: "/\(database)$1", options: .regularExpression)
  }

  /// Runs `statement` on the database `url` names.
  static func run(_ statement: String, url: String, logger: Logger) async throws {
    guard let components = URLComponents(string: url) else { throw ScratchDatabaseError(url: url) }
    let client = PostgresClient(
      configuration: .init(
        host: components.host ?? "127.0.0.1",
        port: components.port ?? 5432,
        username: components.user ?? "postgres",
        password: components.password,
        database: String(components.path.dropFirst()),
        tls: .disable
      ),
      backgroundLogger: logger
    )
    let running = Task { await client.run() }
    defer { running.cancel() }
    try await client.query(PostgresQuery(unsafeSQL: statement))
  }
}

struct ScratchDatabaseError: Error, CustomStringConvertible {
  let url: String
  var description: String { "not a database URL: \(url)" }
}
