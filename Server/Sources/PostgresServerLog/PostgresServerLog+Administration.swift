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
    let running = PostgresServerLog.runDetached(client)
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

extension PostgresServerLog {
  /// The mean number of lock requests waiting in `url`'s database, sampled every `interval` for `duration`
  /// on a connection of its own: what a benchmark divides by its writes per second to get the time writes
  /// spent waiting for locks, per write (Little's law: the mean number waiting is the arrival rate times the
  /// mean wait).
  /// - Throws: ``ServerLogError/storage(_:)`` when the database cannot be reached.
  public static func meanWaitingLocks(
    url: String,
    logger: Logger,
    every interval: Duration,
    for duration: Duration
  ) async throws(ServerLogError) -> Double {
    let target = try PostgresURL(url)
    let client = PostgresClient(configuration: target.configuration, backgroundLogger: logger)
    let running = PostgresServerLog.runDetached(client)
    defer { running.cancel() }
    let end = ContinuousClock.now + duration
    var samples = 0
    var waiting = 0
    do {
      while ContinuousClock.now < end {
        let rows = try await client.query(
          """
          SELECT count(*)::int FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
          WHERE NOT l.granted AND a.datname = current_database()
          """,
          logger: logger
        )
        for try await count in rows.decode(Int.self) { waiting += count }
        samples += 1
        try await Task.sleep(for: interval)
      }
    } catch {
      throw .storage("\(target.location): sampling the lock waits: \(String(reflecting: error))")
    }
    return Double(waiting) / Double(max(samples, 1))
  }
}
