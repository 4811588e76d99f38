import EventProtocol
import EventServer
import Foundation
import PartitionHosting
import PostgresServerLog
import SampleApps
import TestScheduling
import Testing

/// The atomic register on a partitioned log whose users share state: a note from a user of one partition to
/// users of others is one transaction on the author's partition that writes the recipients' rows and leaves
/// messages in their partitions' inboxes. A registration on a recipient's partition that reads those rows must
/// not also receive the note as an event (applied twice), and one that does not read them must receive it
/// (none lost), whatever node holds which partition. Each note is in the snapshot or the queue exactly once;
/// the order of notes from authors of different partitions is theirs to deliver, not the table's.
@Suite(
  "Atomic register on a partitioned log with state shared across partitions: snapshot plus events equals the tables",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PartitionedRegisterPropertyTests {
  typealias Host = PartitionHost<StoredRelay<StoredNoteBoard>, ContinuousClock>
  typealias Node = StoredRegisterPropertyTests.Node

  /// Six users over the partitions, every partition holding one or more: most notes cross partitions.
  static let users: [UserID] = ["alice", "bob", "carol", "dave", "erin", "frank"]
  /// Four partitions in every run, sixteen in a full run (`UPDATE_MACHINE_SEEDS=full`): sixteen partitions'
  /// nodes on three hosts beside the other suites slowed them past their deadlines.
  static let partitions = PartitionMap(count: TestSeeds.isFullRun ? 16 : 4)!

  @Test(
    "registrations racing posts across 4 partitions (16 in a full run), on one node and on three",
    arguments: [1, 3],
    TestSeeds.first(UInt64(1), of: 8).map { $0 + 1 }
  )
  func registrationsRacingPosts(nodes: Int, seed: UInt64) async throws {
    let database = try await ScratchDatabase.create()
    var logs: [PostgresServerLog] = []
    var hosts: [Host] = []
    for rotation in 0..<nodes {
      let log = try await PostgresServerLog.connect(
        url: database.url,
        logger: quietLogger,
        operationTimeout: testTimeout(.seconds(5)),
        partitions: Self.partitions
      )
      logs.append(log)
      hosts.append(
        try await Host.open(log: log, rotation: rotation * Self.partitions.count / nodes) { partition in
          try await EventServer.joining(StoredNoteBoard(), on: partition, clock: ContinuousClock()).0
        }
      )
    }
    try await Self.spread(Self.partitions.count, over: hosts)
    let placement = try await Self.placement(of: Self.users, on: hosts)
    #expect(
      Set(Self.users.map { Self.partitions.partition(of: $0) }).count == min(Self.users.count, Self.partitions.count)
    )

    try await StoredRegisterPropertyTests.check(
      seed: seed,
      users: Self.users,
      writer: { _, sender in placement[sender]! },
      reader: { _, user in placement[user]! },
      inOrder: false,
      settle: { try await Self.drainInboxes(of: logs[0]) }
    )
    for host in hosts { _ = await host.shutdown() }
    for log in logs { await log.close() }
    try await database.drop()
  }

  /// Looks with every host in turn until the partitions are spread over them: every one served, none twice,
  /// by two hosts or more when there are several (with 4 partitions over 3 hosts the plan's shares of 2 may
  /// leave the third with none).
  static func spread(_ count: Int, over hosts: [Host]) async throws {
    for _ in 0..<(8 * hosts.count) {
      for host in hosts { try await host.rebalance() }
      var served: [Int] = []
      var serving = 0
      for host in hosts {
        let partitions = await host.partitionsServed
        served += partitions
        if !partitions.isEmpty { serving += 1 }
      }
      if served.sorted() == Array(0..<count), serving >= min(hosts.count, 2) { return }
    }
    Issue.record("the partitions did not spread over \(hosts.count) hosts")
    throw CancellationError()
  }

  /// The node serving each user's partition, on whichever host holds it.
  static func placement(of users: [UserID], on hosts: [Host]) async throws -> [UserID: Node] {
    var placement: [UserID: Node] = [:]
    for user in users {
      for host in hosts {
        if let node = await host.node(for: user) { placement[user] = node }
      }
    }
    try #require(placement.count == users.count, "every user's partition is served")
    return placement
  }

  /// Waits until no message waits in any partition's inbox: a message is gone once the turn that delivered
  /// it to its queues committed.
  static func drainInboxes(of log: PostgresServerLog) async throws {
    for partition in 0..<log.partitions.count {
      let view = try log.partition(partition)
      while try await view.hasInbox() { try await Task.sleep(for: .milliseconds(20)) }
    }
  }
}
