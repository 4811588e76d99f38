import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import PostgresServerLog
import Synchronization
import TestScheduling
import Testing
import UpdateMachine
import VideoMessaging

@Suite("Blobs over HTTP: resumable uploads, ranged downloads, readers checked", .serialized, .hangGuard)
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
    let firstLog = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
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
    let secondLog = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
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

  /// A completed upload whose completion the service could not record (the database away, the user's
  /// partition moving: `video-partition-soak.sh` met both) keeps its blob and is answered 503; asked where
  /// to resume, the server answers the whole length, so the device sends the completion again and it goes
  /// through. Before, any failure there was answered 429 and the blob deleted; and a completed upload's
  /// length was 0, so a device whose completion answer was lost appended from 0 to a blob no longer partial,
  /// refused at every retry (one video of the soak never left its sender).
  @Test("a completion the service cannot record now keeps the blob, answered 503; the device completes it again")
  func completionNotRecordedKeepsTheBlob() async throws {
    let live = try await LiveServer.start(.memory, routesLedger: { FailsOnceToComplete(inner: $0) })
    defer { live.removeData() }
    let alice = store(live, "alice")
    let key = BlobKey(rawValue: "videos/v-complete")
    let bytes = Data((0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
    try await alice.append(bytes, to: key, at: 0)
    do {
      try await alice.complete(key, at: Timestamp(Date()))
      Issue.record("the completion went through although the ledger failed")
    } catch {
      #expect("\(error)".contains("503"), "\(error)")
    }
    // The device's next attempt asks where to resume: at the end.
    #expect(try await alice.partialLength(key) == bytes.count)
    try await alice.complete(key, at: Timestamp(Date()))
    #expect(try await live.ledger.binding(of: key)?.size == bytes.count, "the completion recorded its size")
    // And once more, as after an answer lost on the way back: still the whole length, still completed.
    #expect(try await alice.partialLength(key) == bytes.count)
    try await alice.complete(key, at: Timestamp(Date()))
    try await live.stop()
  }
}

/// A ledger whose first `uploadCompleted` fails as a node does while the user's partition moves.
private final class FailsOnceToComplete: VideoBlobLedger, Sendable {
  let inner: any VideoBlobLedger
  private let failed = Mutex(false)

  init(inner: any VideoBlobLedger) { self.inner = inner }

  var limits: VideoServerLimits { get async { await inner.limits } }
  func binding(of key: BlobKey) async throws -> BlobBinding? { try await inner.binding(of: key) }
  func mayRead(_ key: BlobKey, user: UserID) async throws -> Bool { try await inner.mayRead(key, user: user) }
  func usage(of user: UserID) async throws -> (storedBytes: Int, uploads: Set<BlobKey>) {
    try await inner.usage(of: user)
  }
  func unclaimedBlobs(in listing: [BlobInfo], now: Timestamp, grace: Duration) async throws -> [BlobKey] {
    try await inner.unclaimedBlobs(in: listing, now: now, grace: grace)
  }
  func takeBlobDeletions() async throws -> [BlobKey] { try await inner.takeBlobDeletions() }
  func handle(_ command: VideoCommand, from user: UserID) async throws {
    if case .uploadCompleted = command,
      failed.withLock({ failed in
        defer { failed = true }
        return !failed
      })
    {
      throw EventAPIError.serviceUnavailable("the user's partition is moving between nodes; send again shortly")
    }
    try await inner.handle(command, from: user)
  }
}
