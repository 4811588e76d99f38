import EventServer
import Foundation
import Logging
import PostgresNIO

extension PostgresServerLog {
  /// Runs `statements` one after another, each on its own (outside a transaction: `CREATE DATABASE` may
  /// not run in one), on the database `url` names, with a client of its own closed afterwards: what
  /// scripts, benches and tests use to create and drop databases beside a log.
  ///
  /// ```swift
  /// try await PostgresServerLog.administer(["CREATE DATABASE scratch"], url: serverURL, logger: logger)
  /// let log = try await PostgresServerLog.connect(url: PostgresServerLog.url(serverURL, naming: "scratch"), logger: logger)
  /// ```
  /// - Throws: ``ServerLogError/storage(_:)`` when the URL is not one, or a statement fails (with the
  ///   server's message).
  public static func administer(_ statements: [String], url: String, logger: Logger) async throws(ServerLogError) {
    let target = try PostgresURL(url)
    let client = PostgresClient(configuration: target.configuration, backgroundLogger: logger)
    let running = Task { await client.run() }
    defer { running.cancel() }
    for statement in statements {
      do {
        try await client.query(PostgresQuery(unsafeSQL: statement), logger: logger)
      } catch {
        let reason = (error as? PSQLError)?.serverInfo?[.message] ?? String(reflecting: error)
        throw .storage("\(target.location): \(statement.prefix(60)): \(reason)")
      }
    }
  }

  /// `url` with the database it names replaced by `database` (its user, host, port and options kept).
  public static func url(_ url: String, naming database: String) -> String {
    url.replacingOccurrences(of: #"/[^/?]*(\?|$)"#, with: "/\(database)$1", options: .regularExpression)
  }
}
