import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import PostgresServerLog
import Testing
import UpdateMachine
import VideoMessaging

@Suite("Blobs over HTTP: resumable uploads, ranged downloads, readers checked", .serialized, .timeLimit(.minutes(1)))
struct BlobTests {
  private func store(_ live: LiveServer, _ user: UserID) -> HTTPBlobStore {
    let key = testKeyByUser[user] ?? "no-such-key"
    return HTTPBlobStore(endpoint: HTTPEndpoint(baseURL: live.url, credentials: .init(user: user, apiKey: key)))
  }

  @Test(
    "an upload resumes from the stored length; the recipient reads ranges; others get BLOB_GONE",
    arguments: VideoServerKind.allCases
  )
  func resumableBothWays(kind: VideoServerKind) async throws {
    let live = try await LiveServer.start(kind)
    defer { live.removeData() }
    let alice = store(live, "alice")
    let bob = store(live, "bob")
    let key = BlobKey(rawValue: "videos/v1")
    let bytes = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    #expect(try await alice.partialLength(key) == 0)
    try await alice.append(bytes.prefix(4_000), to: key, at: 0)
    // The connection dropped here; the device asks where to resume.
    let resumeAt = try await alice.partialLength(key)
    #expect(resumeAt == 4_000)
    await #expect(throws: BlobStoreError.self) { try await alice.append(bytes.suffix(from: 5_000), to: key, at: 5_000) }
    try await alice.append(bytes.suffix(from: resumeAt), to: key, at: resumeAt)
    try await alice.complete(key, at: Timestamp(Date()))
    // Bob may not touch Alice's upload, nor read a blob no video of his names.
    await #expect(throws: BlobStoreError.self) { try await bob.append(Data([1]), to: key, at: 10_000) }
    do {
      _ = try await bob.size(of: key)
      Issue.record("bob read a blob no video of his names")
    } catch {
      #expect(error.isGone)
    }
    try await live.ledger.handle(
      .uploaded(VideoUpload(video: "v1", recipient: "bob", blobKey: key, size: bytes.count)),
      from: "alice"
    )
    #expect(try await bob.size(of: key) == bytes.count)
    var received = Data()
    while received.count < bytes.count {
      received += try await bob.read(key, offset: received.count, length: 3_000)
    }
    #expect(received == bytes)
    try await live.stop()
  }

  @Test(
    "blobs in PostgreSQL: an upload through one server is read through another that has none of its files",
    .enabled(if: testPostgresURL != nil, "set EVENT_SERVER_TEST_POSTGRES_URL (Server/scripts/postgres-tests.sh does)")
  )
  func blobsInTheDatabase() async throws {
    let database = try await ScratchDatabase.create()
    let key = BlobKey(rawValue: "videos/shared")
    let bytes = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
    let firstLog = try await PostgresServerLog.connect(url: database.url, logger: quietLogger)
    let first = try await LiveServer.start(.stored, log: firstLog)
    let alice = store(first, "alice")
    try await alice.append(bytes.prefix(6_000), to: key, at: 0)
    try await alice.append(bytes.suffix(from: try await alice.partialLength(key)), to: key, at: 6_000)
    try await alice.complete(key, at: Timestamp(Date()))
    try await first.ledger.handle(
      .uploaded(VideoUpload(video: "v1", recipient: "bob", blobKey: key, size: bytes.count)),
      from: "alice"
    )
    try await first.stop()
    await firstLog.close()
    #expect(!FileManager.default.fileExists(atPath: first.dataDirectory.appendingPathComponent("blobs").path))
    first.removeData()
    // Another node (a fresh data directory, no files) on the same database.
    let secondLog = try await PostgresServerLog.connect(url: database.url, logger: quietLogger)
    let second = try await LiveServer.start(.stored, log: secondLog)
    defer { second.removeData() }
    let bob = store(second, "bob")
    #expect(try await bob.size(of: key) == bytes.count)
    var received = Data()
    while received.count < bytes.count { received += try await bob.read(key, offset: received.count, length: 3_000) }
    #expect(received == bytes)
    do {
      _ = try await store(second, "carol").size(of: key)
      Issue.record("carol read a blob no video of hers names")
    } catch {
      #expect(error.isGone)
    }
    try await second.stop()
    await secondLog.close()
  }

  @Test(
    "upload ownership survives a restart: after it, another user still cannot append to the upload",
    arguments: VideoServerKind.allCases
  )
  func ownershipSurvivesRestart(kind: VideoServerKind) async throws {
    let first = try await LiveServer.start(kind)
    defer { first.removeData() }
    let key = BlobKey(rawValue: "videos/alice-partial")
    try await store(first, "alice").append(Data(repeating: 1, count: 1_000), to: key, at: 0)
    #expect(try await first.ledger.binding(of: key)?.owner == "alice")
    try await first.stop()

    let second = try await LiveServer.start(kind, dataDirectory: first.dataDirectory)
    let bob = store(second, "bob")
    do {
      try await bob.append(Data([2]), to: key, at: 1_000)
      Issue.record("bob appended to alice's upload after a restart")
    } catch {
      #expect(error.isGone)
    }
    #expect(try await store(second, "alice").partialLength(key) == 1_000)
    try await store(second, "alice").append(Data([3]), to: key, at: 1_000)
    try await second.stop()
  }

  @Test(
    "two devices exchange a video over HTTP: uploaded, downloaded, viewed, on both sides",
    arguments: VideoServerKind.allCases
  )
  func devicesExchangeAVideo(kind: VideoServerKind) async throws {
    let live = try await LiveServer.start(kind)
    defer { live.removeData() }
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("devices-\(UUID())")
    defer { try? FileManager.default.removeItem(at: folder) }
    func device(_ user: UserID) -> VideoDevice {
      VideoDevice(
        user: user,
        transport: live.transport(user),
        store: InMemoryStore(),
        remoteBlobs: store(live, user),
        localBlobs: FileBlobStore(directory: folder.appendingPathComponent(user.rawValue)),
        clock: ContinuousClock(),
        seed: user == "alice" ? 1 : 2,
        chunkSize: 4_096
      )
    }
    let alice = device("alice")
    let bob = device("bob")
    let deliveries = await bob.events()
    await alice.start()
    await bob.start()
    let recording = Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    let video = await alice.send(recording, to: "bob")
    var delivered: DeliveredVideo?
    for await event in deliveries {
      if case .delivered(let video) = event {
        delivered = video
        break
      }
    }
    #expect(delivered?.video.id == video)
    let local = FileBlobStore(directory: folder.appendingPathComponent("bob"))
    let key = try #require(delivered?.localKey)
    #expect(try await local.read(key, offset: 0, length: recording.count) == recording)
    await bob.markViewed(video)
    await waitFor(alice.machine) { $0.confirmedState?.outgoing.first?.status == .viewed }
    await alice.stop()
    await bob.stop()
    try await live.stop()
  }
}
