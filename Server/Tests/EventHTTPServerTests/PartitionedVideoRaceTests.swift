import EventProtocol
import EventServer
import Foundation
import PartitionHosting
import PostgresServerLog
import TestScheduling
import Testing
import VideoMessaging

/// The stored video service's rules hold when the turns of two partitions run at the same moment on its
/// shared tables (PostgreSQL's `READ COMMITTED`): the commands race here from users of different
/// partitions, many times over, and the tables must end as one turn after the other would leave them.
@Suite(
  "The video service's rules across partitions racing",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PartitionedVideoRaceTests {
  typealias Host = PartitionHost<StoredRelay<StoredVideoServer>, ContinuousClock>

  /// Two users on different partitions of a log of four, every partition served by this process.
  private func withTwoPartitions(
    _ body: (Host, _ first: UserID, _ second: UserID, _ database: ScratchDatabase) async throws -> Void
  ) async throws {
    let database = try await ScratchDatabase.create()
    let map = PartitionMap(count: 4)!
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: map
    )
    let host = try await Host.open(log: log, rotation: 0) { partition in
      try await EventServer.joining(StoredVideoServer(), on: partition, clock: ContinuousClock()).0
    }
    #expect(try await host.rebalance().taken == [0, 1, 2, 3])
    let users = (0...).lazy.map { UserID("user\($0)") }
    let first = users.first { map.partition(of: $0) == 1 }!
    let second = users.first { map.partition(of: $0) == 2 }!
    do {
      try await body(host, first, second, database)
    } catch {
      await host.shutdown()
      await log.close()
      throw error
    }
    await host.shutdown()
    await log.close()
    try await database.drop()
  }

  /// Whether `command` from `user` was accepted (a refusal or a failed turn is not).
  private func accepted(_ command: VideoCommand, from user: UserID, on host: Host) async -> Bool {
    guard let node = await host.node(for: user) else { return false }
    do {
      try await node.handle(.request(command), from: user)
      return true
    } catch {
      return false
    }
  }

  @Test("two users naming one blob key at once: one binds it, the other does not take it over")
  func oneOwnerPerKey() async throws {
    try await withTwoPartitions { host, first, second, database in
      for round in 0..<40 {
        let key = BlobKey(rawValue: "videos/raced-\(round)")
        async let byFirst = accepted(.uploadStarted(key), from: first, on: host)
        async let bySecond = accepted(.uploadStarted(key), from: second, on: host)
        let (firstBound, secondBound) = await (byFirst, bySecond)
        let owner = try await Self.owner(of: key, in: database)
        #expect(firstBound != secondBound, "round \(round): both or neither bound the key")
        #expect(
          owner == (firstBound ? first : second),
          "round \(round): the key's owner is \(String(describing: owner))"
        )
      }
    }
  }

  @Test("a recipient's mark racing its sender's deletion never brings the video back")
  func deletionIsFinal() async throws {
    try await withTwoPartitions { host, sender, recipient, database in
      for round in 0..<30 {
        let video = VideoID(rawValue: "v-\(round)")
        let upload = VideoUpload(video: video, recipient: recipient, blobKey: BlobKey(rawValue: "b-\(round)"), size: 10)
        #expect(await accepted(.uploaded(upload), from: sender, on: host))
        async let viewed = accepted(.viewed(video), from: recipient, on: host)
        async let deleted = accepted(.deleted(video), from: sender, on: host)
        _ = await (viewed, deleted)
        let rows = try await Self.videoRows(video, in: database)
        #expect(rows == 0, "round \(round): the deleted video came back")
      }
    }
  }

  private static func owner(of key: BlobKey, in database: ScratchDatabase) async throws -> UserID? {
    try await query(database, "SELECT owner FROM blob_bindings WHERE blob_key = ?", [.text(key.rawValue)])
      .first?["owner"]?.text.map(UserID.init(rawValue:))
  }

  private static func videoRows(_ video: VideoID, in database: ScratchDatabase) async throws -> Int64 {
    try await query(database, "SELECT count(*) AS n FROM videos WHERE id = ?", [.text(video.rawValue)])
      .first?["n"]?.integer ?? -1
  }

  /// One statement on a log of its own (the tables are the partitions' shared ones).
  private static func query(_ database: ScratchDatabase, _ sql: String, _ values: [SQLValue]) async throws -> [SQLRow] {
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    do {
      let rows = try await log.transaction { try await $0.execute(sql, values) }
      await log.close()
      return rows
    } catch {
      await log.close()
      throw error
    }
  }
}
