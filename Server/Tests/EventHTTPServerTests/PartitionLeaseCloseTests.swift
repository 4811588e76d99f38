import EventServer
import Foundation
import PostgresNIO
import TestScheduling
import Testing

@testable import PostgresServerLog

/// A node stopping lets its partitions go at once. Found by the video partition soak: under load a survey of
/// the leases took seconds, and a SIGTERMed node's lease session waited for the survey under way before its
/// leases were free (its partitions unserved for 5 s, the operation timeout).
@Suite(
  "Partition leases: closing them does not wait for the session",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PartitionLeaseCloseTests {
  @Test("closing the leases lets them go while the session still waits on the database")
  func closeDoesNotWaitForTheSession() async throws {
    let database = try await ScratchDatabase.create()
    // A long operation timeout: a close that waited for the session would wait for the blocker below.
    let logA = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(120)),
      partitions: PartitionMap(count: 4)
    )
    let logB = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    let nodeA = try await PartitionLeases.open(on: logA)
    let nodeB = try await PartitionLeases.open(on: logB)
    for partition in 0..<4 { #expect(try await nodeA.tryAcquire(partition)) }
    let observer = try Observer(url: database.url)

    // Another session holds the table a survey reads, for a minute: node A's next survey waits behind it.
    let blocker = Task {
      try? await ScratchDatabase.admin(
        "DO $$ BEGIN LOCK TABLE partition_node IN ACCESS EXCLUSIVE MODE; PERFORM pg_sleep(60); END $$",
        on: database.url
      )
    }
    let blockerHoldsTheTable =
      "SELECT count(*)::int FROM pg_locks WHERE relation = 'partition_node'::regclass AND granted"
      + " AND mode = 'AccessExclusiveLock'"
    try await observer.wait(until: blockerHoldsTheTable, is: 1)
    let survey = Task { try? await nodeA.survey() }
    try await observer.wait(
      until: "SELECT count(*)::int FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%pg_locks%'",
      is: 1
    )

    await nodeA.close()
    #expect(try await observer.count(blockerHoldsTheTable) == 1, "closed while the survey still waited")
    #expect(nodeA.held.isEmpty)

    // The blocker ends; node A's session ends with its connection, and every lease is free for node B.
    try await observer.count(
      "SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity WHERE query LIKE 'DO $$%'"
    )
    _ = await blocker.value
    _ = await survey.value
    try await observer.wait(
      // This database's leases only: other tests' scratch databases may hold leases meanwhile.
      until: "SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = \(0x6576_5074)"
        + " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
      is: 0
    )
    for partition in 0..<4 { #expect(try await nodeB.tryAcquire(partition)) }

    observer.close()
    await nodeB.close()
    await logA.close()
    await logB.close()
    try await database.drop()
  }
}

extension PartitionLeaseCloseTests {
  @Test("a lease session that does not open in time is closed, never left waiting to take the node lock later")
  func sessionNotOpenedInTimeIsClosed() async throws {
    let database = try await ScratchDatabase.create()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: PartitionMap(count: 2)
    )
    let observer = try Observer(url: database.url)
    // Another session holds the node lock exclusively for a minute: a lease session's first statement waits.
    let blocker = Task {
      try? await ScratchDatabase.admin(
        "SELECT pg_advisory_lock(\(PartitionLeases.nodeKey)), pg_sleep(60)",
        on: database.url
      )
    }
    let nodeLocks =
      "SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = \(PartitionLeases.nodeKey >> 32)"
      + " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    try await observer.wait(until: nodeLocks + " AND granted AND mode = 'ExclusiveLock'", is: 1)
    await #expect(throws: ServerLogError.self) { _ = try await PartitionLeases.open(on: log) }
    // The session that waited is gone while the lock is still held: it cannot take the lock once it is free
    // and hold it with no node behind it.
    try await observer.wait(until: nodeLocks + " AND NOT granted", is: 0)
    #expect(try await observer.count(nodeLocks + " AND granted AND mode = 'ExclusiveLock'") == 1)

    try await observer.count(
      "SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity WHERE query LIKE 'SELECT pg_advisory_lock(%'"
    )
    _ = await blocker.value
    observer.close()
    await log.close()
    try await database.drop()
  }
}

extension PartitionLeaseCloseTests {
  @Test("a session holding the node lock with no node behind it does not count as a live node")
  func orphanNodeLockNotCounted() async throws {
    let database = try await ScratchDatabase.create()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: PartitionMap(count: 4)
    )
    let leases = try await PartitionLeases.open(on: log)
    #expect(try await leases.survey().liveNodes == 1)
    let observer = try Observer(url: database.url)
    // A session takes the shared node lock as a lease session given up while it waited would, once the
    // lock was free: it holds the lock and idles, with no node behind it.
    let orphan = Task {
      try? await ScratchDatabase.admin(
        "SELECT pg_advisory_lock_shared(\(PartitionLeases.nodeKey)), pg_sleep(60)",
        on: database.url
      )
    }
    let nodeLocks =
      "SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = \(PartitionLeases.nodeKey >> 32)"
      + " AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND granted"
    try await observer.wait(until: nodeLocks, is: 2)
    let survey = try await leases.survey()
    #expect(survey.liveNodes == 1, "only the session whose node went on past the lock counts")
    #expect(
      PartitionLeasePlan(
        partitions: 4,
        liveNodes: survey.liveNodes,
        mine: survey.mine,
        heldByOthers: survey.heldByOthers,
        rotation: 0
      ).acquire.count == 4,
      "the node's share is not shrunk by the orphan"
    )

    try await observer.count(
      "SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity WHERE query LIKE 'SELECT pg_advisory_lock_shared(%'"
        + " AND datname = current_database()"
    )
    _ = await orphan.value
    observer.close()
    await leases.close()
    await log.close()
    try await database.drop()
  }
}

/// A connection of the test's own, to watch the database.
private struct Observer {
  let client: PostgresClient
  let running: Task<Void, Never>

  init(url: String) throws {
    let parts = try #require(URLComponents(string: url))
    let configuration = PostgresClient.Configuration(
      host: try #require(parts.host),
      port: parts.port ?? 5432,
      username: parts.user ?? "postgres",
      password: parts.password,
      database: String(parts.path.dropFirst()),
      tls: .disable
    )
    let client = PostgresClient(configuration: configuration, backgroundLogger: quietLogger)
    self.client = client
    running = Task { await client.run() }
  }

  /// The one integer `query` answers.
  @discardableResult
  func count(_ query: String) async throws -> Int {
    for try await value in try await client.query(PostgresQuery(unsafeSQL: query)).decode(Int.self) { return value }
    return 0
  }

  /// Waits (at most 30 s, looking every 20 ms) until `query` answers `expected`.
  func wait(until query: String, is expected: Int) async throws {
    for _ in 0..<1_500 {
      if try await count(query) == expected { return }
      try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("\(query) did not answer \(expected) within 30 s")
  }

  func close() { running.cancel() }
}
