import EventProtocol
import EventServer
import Foundation
import SQLiteServerLog
import Testing
import VideoMessaging

/// The video tables' version 3 (captions) on a database that version 2 wrote: the videos already in a
/// history keep their place and have no caption; their senders can caption them from then on.
@Suite("Video tables: captions migrate onto a database written before them")
struct VideoCaptionMigrationTests {
  @Test("a history written at version 2 reads back uncaptioned at version 3, and takes captions")
  func versionTwoToThree() async throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("captions-\(UUID())")
    defer { try? FileManager.default.removeItem(at: folder) }
    let log = try await SQLiteServerLog.open(path: folder.appendingPathComponent("videos.sqlite").path)
    do {
      let before = Array(StoredVideoServer.schema.prefix { $0.version <= 2 })
      #expect(try await log.migrate(before).applied == [1, 2])
      let video = VideoID(rawValue: "v1")
      let now = Timestamp(secondsSinceEpoch: 1_700_000_000)
      // What a version-2 server wrote: the row without the column (inserted as version 2's statement did).
      _ = try await log.transaction { transaction in
        try await transaction.execute(
          """
          INSERT INTO video_history (video, sender, recipient, first_user, second_user, status)
          VALUES ('v1', 'alice', 'bob', 'alice', 'bob', 1)
          """
        )
      }
      #expect(try await log.migrate(StoredVideoServer.schema).applied == [3])
      let server = StoredVideoServer()
      let request = FetchRequest(
        narrow: VideoHistory.conversation(between: "bob", and: "alice"),
        anchor: .newest,
        before: 5,
        after: 0
      )
      let page = try await log.transaction { try await server.fetch(request, for: "bob", in: $0) }
      #expect(
        page.items == [
          VideoHistoryItem(video: video, sender: "alice", recipient: "bob", status: .uploaded, position: 1)
        ]
      )
      let deliveries = try await log.transaction {
        try await server.handle(.captioned(video, caption: "at last"), from: "alice", at: now, in: $0)
      }
      #expect(deliveries.map(\.event) == [.captioned(VideoCaptionChanged(video: video, caption: "at last"))])
      let captioned = try await log.transaction { try await server.fetch(request, for: "bob", in: $0) }
      #expect(captioned.items.map(\.caption) == ["at last"])
    } catch {
      await log.close()
      throw error
    }
    await log.close()
  }
}
