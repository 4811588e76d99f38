import EventProtocol
import EventServer
import Foundation
import PartitionHosting
import PostgresServerLog
import TestScheduling
import Testing

/// One row every partition's users change: the tally a team shares.
struct SharedTally: StoredApplication {
  struct Counted: EventPayload {
    static var knownEventTypes: Set<String> { ["counted"] }
    var eventType: String { "counted" }
    var value: Int
  }

  var migrations: [SchemaMigration] {
    [
      SchemaMigration(
        version: 1,
        name: "tally",
        sqlite: [
          "CREATE TABLE tally (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)", "INSERT INTO tally VALUES (1, 0)",
        ],
        postgres: [
          "CREATE TABLE tally (id integer PRIMARY KEY, value bigint NOT NULL)", "INSERT INTO tally VALUES (1, 0)",
        ]
      )
    ]
  }

  static func value(in transaction: any DatabaseTransaction) async throws -> Int {
    Int(try await transaction.execute("SELECT value FROM tally WHERE id = 1").first?["value"]?.integer ?? -1)
  }

  func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> Int {
    try await Self.value(in: transaction)
  }

  func handle(
    _ amount: Int,
    from user: UserID,
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<Counted>] {
    let rows = try await transaction.execute(
      "UPDATE tally SET value = value + ? WHERE id = 1 RETURNING value",
      [.integer(Int64(amount))]
    )
    return [Delivery(to: [user], event: Counted(value: Int(rows.first?["value"]?.integer ?? -1)))]
  }
}

/// A partitioned turn with a registration reads one snapshot (REPEATABLE READ), so a write in it to a row
/// another partition changed meanwhile is refused by the database (a serialization failure): the node runs
/// that write again in its next turn, on a new snapshot, instead of failing it. Turns of writes alone read
/// each statement's (READ COMMITTED): their writes to the row wait for each other and never conflict.
@Suite(
  "Writes of several partitions to one shared row: refused for a concurrent turn, run again, none failed or lost",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PartitionedConflictTests {
  typealias Host = PartitionHost<StoredRelay<SharedTally>, ContinuousClock>

  @Test(
    "six users on six partitions add to one row at once while they register: every write acknowledged, the row their sum"
  )
  func concurrentWritesToOneRow() async throws {
    let database = try await ScratchDatabase.create()
    let map = PartitionedRegisterPropertyTests.partitions
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: map
    )
    let host = try await Host.open(log: log, rotation: 0) { partition in
      try await EventServer.joining(SharedTally(), on: partition, clock: ContinuousClock()).0
    }
    #expect(try await host.rebalance().taken.count == map.count)
    let users = PartitionedRegisterPropertyTests.users
    #expect(Set(users.map(map.partition(of:))).count == min(users.count, map.count))
    let writes = 12
    try await withThrowingTaskGroup(of: Void.self) { group in
      for user in users {
        let node = try #require(await host.node(for: user))
        group.addTask {
          for index in 1...writes {
            _ = try await node.applyMutation(
              .request(1),
              from: user,
              clientID: ClientID(rawValue: "\(user)-phone"),
              mutationID: MutationID(UInt64(index))
            )
          }
        }
        // Registrations beside the writes put writes of the same turns in one snapshot, where they conflict.
        group.addTask {
          for _ in 1...writes { _ = try await node.register(user: user) }
        }
      }
      try await group.waitForAll()
    }
    let node = try #require(await host.anyNode)
    #expect(try await node.readStoredState { try await SharedTally.value(in: $0) } == users.count * writes)
    _ = await host.shutdown()
    await log.close()
    try await database.drop()
  }
}
