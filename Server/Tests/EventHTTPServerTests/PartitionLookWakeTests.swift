import EventProtocol
import EventServer
import Foundation
import PartitionHosting
import PostgresServerLog
import SampleApps
import TestScheduling
import Testing

/// A node that lets leases go, joins or stops announces it, and every other node looks at the leases at once
/// instead of at its next interval: a partition moving between live nodes waits for no interval.
@Suite(
  "Partition looks woken by announced lease changes",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PartitionLookWakeTests {
  typealias Host = PartitionHost<NoteBoard, ContinuousClock>

  @Test("with looks a minute apart, a node joining takes its share and a node stopping hands over, at once")
  func announcedChangesWakeLooks() async throws {
    let database = try await ScratchDatabase.create()
    let logA = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: PartitionMap(count: 4)!
    )
    let logB = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    let hostA = try await PostgresPartitionTests.host(on: logA, rotation: 0)
    #expect(try await hostA.rebalance().taken == [0, 1, 2, 3])
    // Each host looks once, then waits a minute or for an announcement.
    let looksA = Task { await hostA.run(every: .seconds(60), clock: ContinuousClock()) }
    let hostB = try await PostgresPartitionTests.host(on: logB, rotation: 1)
    let looksB = Task { await hostB.run(every: .seconds(60), clock: ContinuousClock()) }

    // B's joining wakes A, which lets two go; A's release wakes B, which takes them. Waited for at most
    // 30 s, half the looks' interval: without the announcements nothing moves before a minute.
    #expect(try await Self.waitUntil(hostB, serves: 2), "B took its share without waiting for an interval")
    #expect(await hostA.partitionsServed.count == 2)

    looksA.cancel()
    await looksA.value
    await hostA.shutdown()
    #expect(try await Self.waitUntil(hostB, serves: 4), "B took A's partitions at A's stop")

    looksB.cancel()
    await looksB.value
    await hostB.shutdown()
    await logB.close()
    await logA.close()
    try await database.drop()
  }

  /// Whether `host` serves `count` partitions within 30 s (a bound on the wait, not a timing).
  private static func waitUntil(_ host: Host, serves count: Int) async throws -> Bool {
    let deadline = ContinuousClock.now + .seconds(30)
    while await host.partitionsServed.count != count {
      guard ContinuousClock.now < deadline else { return false }
      try await Task.sleep(for: .milliseconds(50))
    }
    return true
  }
}
