import EventServer
import Foundation
import Logging
import PostgresServerLog
import ServiceLifecycle
import TestScheduling
import Testing

/// A log's connections live until the log is closed, whatever task opened it. PostgresNIO's client stops
/// at a service group's graceful shutdown when its `run()` inherits the service's task-local context: a
/// partition taken by a node's look (which runs inside the node's services) lost its connections the moment
/// the node began to stop, and the partition's last turn waited for a connection until the log's deadline
/// (5 s), holding the node's leases, and so the partitions' takeover, that long.
@Suite(
  "PostgreSQL log lifetime: connections outlive a service group's graceful shutdown until closed",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .hangGuard
)
struct PostgresClientLifetimeTests {
  /// Opens a partition inside a service, then, once the group is stopping, appends to it.
  private struct OpensAPartition: Service {
    let log: PostgresServerLog
    let opened: AsyncStream<Void>.Continuation
    let result: AsyncStream<Result<Void, ServerLogError>>.Continuation

    func run() async throws {
      let view = try log.openPartition(1)
      // The view answers while the group runs.
      _ = try await view.records(after: 0, limit: 1)
      opened.yield()
      try? await gracefulShutdown()
      // Stopping: what a partition's node does now (its last acknowledgements) must still reach the database.
      do {
        try await view.appendTurn(after: 0) { _ in [] }
        result.yield(.success(()))
      } catch {
        result.yield(.failure(error))
      }
      await view.close()
    }
  }

  @Test("a partition opened inside a service keeps its connections through the service's graceful shutdown")
  func connectionsOutliveGracefulShutdown() async throws {
    let database = try await ScratchDatabase.create()
    // A long deadline: a view whose connections went away would wait this long, not fail at once.
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(20)),
      partitions: PartitionMap(count: 2)!
    )
    let (openings, opened) = AsyncStream.makeStream(of: Void.self)
    let (results, result) = AsyncStream.makeStream(of: Result<Void, ServerLogError>.self)
    let group = ServiceGroup(
      services: [OpensAPartition(log: log, opened: opened, result: result)],
      logger: quietLogger
    )
    let running = Task { try await group.run() }
    var opening = openings.makeAsyncIterator()
    _ = await opening.next()
    await group.triggerGracefulShutdown()
    var answers = results.makeAsyncIterator()
    let answer = try #require(await answers.next())
    // Answered by the database: a pool shut down fails at once, one waiting for a connection at the deadline.
    #expect(throws: Never.self) { try answer.get() }
    try await running.value
    await log.close()
    try await database.drop()
  }
}
