import EventProtocol
import EventServer
import Foundation
import PartitionHosting
import PostgresServerLog
import SampleApps
import TestScheduling
import Testing

/// The stored note board with its users placed by team: a user `t1/alice` is in team `t1`'s partition.
struct TeamNoteBoard: StoredApplication {
  typealias Snapshot = NoteSnapshot
  typealias Event = NoteEvent
  typealias Command = NoteBoard.Command

  var migrations: [SchemaMigration] { StoredNoteBoard.schema }

  func partitionKey(for user: UserID) -> String {
    String(user.rawValue.prefix { $0 != "/" })
  }

  func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> NoteSnapshot {
    try await StoredNoteBoard().snapshot(for: user, in: transaction)
  }

  func handle(
    _ command: NoteBoard.Command,
    from user: UserID,
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<NoteEvent>] {
    try await StoredNoteBoard().handle(command, from: user, at: now, in: transaction)
  }
}

/// Partitions the application chooses (``StoredApplication/partitionKey(for:)``): a team's users share a
/// partition, so a write among them is one turn of that partition and crosses no inbox; a write to another
/// team still reaches it, once, through its inbox.
@Suite(
  "Partitions by the application's key: a team in one partition, its writes through no inbox",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PartitionKeyTests {
  typealias Host<Stored: StoredApplication> = PartitionHost<StoredRelay<Stored>, ContinuousClock>

  static let teamOne: [UserID] = (0..<6).map { UserID("t1/u\($0)") }
  static let teamTwo: [UserID] = (0..<6).map { UserID("t2/u\($0)") }

  /// Opens a partitioned log (``PartitionedRegisterPropertyTests/partitions``) on `database`, all served by one host of `application`, with
  /// every message left in an inbox counted in `inbox_sent` (a trigger: messages are taken at once).
  static func serve<Stored: StoredApplication>(
    _ application: Stored,
    on database: ScratchDatabase
  ) async throws -> (PostgresServerLog, Host<Stored>) {
    let map = PartitionedRegisterPropertyTests.partitions
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: map
    )
    for statement in [
      "CREATE TABLE inbox_sent (partition integer NOT NULL)",
      """
      CREATE FUNCTION note_inbox_sent() RETURNS trigger AS $$
      BEGIN INSERT INTO inbox_sent VALUES (NEW.partition); RETURN NEW; END $$ LANGUAGE plpgsql
      """,
      "CREATE TRIGGER inbox_sent AFTER INSERT ON event_inbox FOR EACH ROW EXECUTE FUNCTION note_inbox_sent()",
    ] {
      try await ScratchDatabase.admin(statement, on: database.url)
    }
    let host = try await Host<Stored>.open(
      log: log,
      rotation: 0,
      partitionKey: { application.partitionKey(for: $0) }
    ) { partition in
      try await EventServer.joining(application, on: partition, clock: ContinuousClock()).0
    }
    #expect(try await host.rebalance().taken.count == map.count)
    return (log, host)
  }

  static func inboxMessagesSent(on log: PostgresServerLog) async throws -> Int {
    let rows = try await log.transaction { try await $0.execute("SELECT count(*) AS n FROM inbox_sent") }
    return Int(rows.first?["n"]?.integer ?? -1)
  }

  /// Each of `team` posts a note to the whole team; every member's queue hears all of them.
  static func postAround<Stored: StoredApplication>(
    in team: [UserID],
    on host: Host<Stored>
  ) async throws where Stored.Command == NoteBoard.Command, Stored.Event == NoteEvent {
    var queues: [(UserID, Registration<Stored.Snapshot?>, StoredRelay<Stored>.Command)] = []
    for user in team {
      let node = try #require(await host.node(for: user))
      queues.append((user, try await node.register(user: user), .request(.post("from \(user)", to: team))))
    }
    for (index, (user, _, post)) in queues.enumerated() {
      let node = try #require(await host.node(for: user))
      _ = try await node.applyMutation(post, from: user, clientID: "phone", mutationID: MutationID(UInt64(index + 1)))
    }
    for (user, queue, _) in queues {
      let node = try #require(await host.node(for: user))
      var notes: [String] = []
      var last = queue.lastEventID
      while notes.count < team.count {
        let events = try await node.events(queueID: queue.queueID, user: user, lastEventID: last)
        last = events.last?.id ?? last
        notes += events.compactMap { if case .payload(.note(let text)) = $0.body { text } else { nil } }
      }
      #expect(notes.sorted() == team.map { "from \($0)" }.sorted(), "\(user)'s queue")
    }
  }

  @Test("a team's users share one partition; their notes to each other cross no inbox, a note to another team does")
  func teamInOnePartition() async throws {
    let database = try await ScratchDatabase.create()
    let (log, host) = try await Self.serve(TeamNoteBoard(), on: database)
    let teamOnePartitions = Set(await Self.teamOne.asyncMap { await host.partition(of: $0) })
    let teamTwoPartition = await host.partition(of: Self.teamTwo[0])
    #expect(teamOnePartitions == [log.partitions.partition(ofKey: "t1")])
    #expect(teamOnePartitions != [teamTwoPartition], "the two teams hash to different partitions")

    try await Self.postAround(in: Self.teamOne, on: host)
    #expect(try await Self.inboxMessagesSent(on: log) == 0, "a team's writes stay in its partition")

    // Across teams: one message, to the other team's partition, and the note arrives once.
    let sender = try #require(await host.node(for: Self.teamOne[0]))
    let receiver = try #require(await host.node(for: Self.teamTwo[0]))
    let queue = try await receiver.register(user: Self.teamTwo[0])
    _ = try await sender.applyMutation(
      .request(.post("across", to: [Self.teamTwo[0]])),
      from: Self.teamOne[0],
      clientID: "phone",
      mutationID: MutationID(100)
    )
    var last = queue.lastEventID
    var notes: [String] = []
    while notes.isEmpty {
      let events = try await receiver.events(queueID: queue.queueID, user: Self.teamTwo[0], lastEventID: last)
      last = events.last?.id ?? last
      notes += events.compactMap { if case .payload(.note(let text)) = $0.body { text } else { nil } }
    }
    #expect(notes == ["across"])
    #expect(try await Self.inboxMessagesSent(on: log) == 1)
    _ = await host.shutdown()
    await log.close()
    try await database.drop()
  }

  @Test("by default users are placed by their own ids: the same team's notes cross inboxes")
  func byUserByDefault() async throws {
    let database = try await ScratchDatabase.create()
    let (log, host) = try await Self.serve(StoredNoteBoard(), on: database)
    let partitions = Set(await Self.teamOne.asyncMap { await host.partition(of: $0) })
    #expect(partitions.count > 1)
    try await Self.postAround(in: Self.teamOne, on: host)
    #expect(try await Self.inboxMessagesSent(on: log) > 0)
    _ = await host.shutdown()
    await log.close()
    try await database.drop()
  }
}

extension Array where Element: Sendable {
  fileprivate func asyncMap<T>(_ transform: (Element) async -> T) async -> [T] {
    var result: [T] = []
    for element in self { result.append(await transform(element)) }
    return result
  }
}
