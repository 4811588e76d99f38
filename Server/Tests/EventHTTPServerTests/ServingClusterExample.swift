// The PostgreSQL example of docs/serving.md, compiled here (running it needs a PostgreSQL server: the cluster
// soak and the PostgreSQL tests run the same construction); ServingExampleTests checks the document shows
// exactly this code.
import EventHTTPServer
import EventProtocol
import EventServer
import Logging
import PostgresServerLog

// CLUSTER-BEGIN
/// The same board with its log in PostgreSQL: every process started this way on one database is a node of
/// one cluster (put them behind nginx; any node answers any queue).
func runKanbanNode(port: Int, postgresURL: String) async throws {
  let logger = Logger(label: "kanban")
  // Every database call has this deadline; past it a write is answered 503 with Retry-After, never held.
  let log = try await PostgresServerLog.connect(url: postgresURL, logger: logger, operationTimeout: .seconds(5))
  var configuration = EventHTTPServerConfiguration(
    keys: try APIKeys(["alice": "alice-secret-key", "bob": "bob-secret-key"])
  )
  configuration.port = port
  configuration.rateLimit = RateLimiter.Policy(burst: 200, perSecond: 50)  // per user; over it: 429, Retry-After
  let server = EventHTTPServer(
    application: KanbanServer(team: ["alice", "bob"]),
    configuration: configuration,
    logger: logger,
    log: log  // the caller opens and closes it
  )
  do {
    try await server.run()
  } catch {
    await log.close()
    throw error
  }
  await log.close()
}
// CLUSTER-END
