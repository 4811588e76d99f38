import EventProtocol
import EventServer
import Foundation
import Testing
import VideoMessaging

/// Blob keys are not capabilities, and what one user keeps is bounded (`docs/security.md`).
@Suite("VideoServer: blob keys and bounds per user")
struct BlobBindingTests {
  let vid1 = videoID(1)
  let vid2 = videoID(2)

  @Test("a key another user uploads under cannot be claimed: Bob naming Alice's key for his video is refused")
  func keyOfAnotherUploader() throws {
    var server = VideoServer()
    let key = BlobKey(rawValue: "videos/alice-secret")
    _ = try server.handle(.uploadStarted(key), from: alice)
    let stolen = VideoUpload(video: vid2, recipient: carol, blobKey: key, size: 3)
    #expect(throws: CommandRejection.self) { try server.handle(.uploaded(stolen), from: bob) }
    #expect(server.videos.isEmpty)
    #expect(!server.mayRead(key, user: bob) && !server.mayRead(key, user: carol))
    // Alice's own notice still claims it.
    _ = try server.handle(.uploaded(VideoUpload(video: vid1, recipient: bob, blobKey: key, size: 3)), from: alice)
    #expect(server.mayRead(key, user: alice) && server.mayRead(key, user: bob) && !server.mayRead(key, user: carol))
  }

  @Test("a key named first by a notice binds to its sender: nobody else may then upload under it or claim it")
  func notBeforeUpload() throws {
    var server = VideoServer()
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice)
    #expect(server.uploadOwner(of: .forVideo(vid1)) == alice)
    #expect(throws: CommandRejection.self) { try server.handle(.uploadStarted(.forVideo(vid1)), from: bob) }
  }

  @Test("a key claims exactly one video")
  func oneVideoPerKey() throws {
    var server = VideoServer()
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice)
    let again = VideoUpload(video: vid2, recipient: carol, blobKey: .forVideo(vid1), size: 3)
    #expect(throws: CommandRejection.self) { try server.handle(.uploaded(again), from: alice) }
  }

  @Test("deleting revokes reading at once, and a released key is never claimable or writable again")
  func releasedForever() throws {
    var server = VideoServer()
    let key = BlobKey.forVideo(vid1)
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice, at: t0)
    #expect(server.mayRead(key, user: bob))
    _ = try server.handle(.deleted(vid1), from: alice, at: t0)
    #expect(!server.mayRead(key, user: bob) && !server.mayRead(key, user: alice))
    #expect(server.uploadOwner(of: key) == nil)
    for user in [alice, bob] {
      #expect(throws: CommandRejection.self) { try server.handle(.uploadStarted(key), from: user) }
      let claim = VideoUpload(video: vid2, recipient: carol, blobKey: key, size: 3)
      #expect(throws: CommandRejection.self) { try server.handle(.uploaded(claim), from: user) }
    }
  }

  @Test("a downloaded video's blob is no longer readable, by either side")
  func downloadedRevokes() throws {
    var server = VideoServer()
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice)
    _ = try server.handle(.downloaded(vid1), from: bob)
    #expect(!server.mayRead(.forVideo(vid1), user: bob) && !server.mayRead(.forVideo(vid1), user: alice))
  }

  @Test("ids and strings over their bounds are refused and change nothing")
  func stringBounds() throws {
    var server = VideoServer()
    let long = String(repeating: "x", count: 900_000)
    let uploads = [
      VideoUpload(video: VideoID(rawValue: long), recipient: bob, blobKey: "videos/a", size: 1),
      VideoUpload(video: vid1, recipient: UserID(rawValue: long), blobKey: "videos/a", size: 1),
      VideoUpload(video: vid1, recipient: bob, blobKey: BlobKey(rawValue: long), size: 1),
      VideoUpload(video: vid1, recipient: bob, blobKey: "videos/a", size: -1),
      VideoUpload(video: vid1, recipient: bob, blobKey: "videos/a", size: Int.max),
    ]
    for upload in uploads {
      #expect(throws: CommandRejection.self) { try server.handle(.uploaded(upload), from: alice) }
    }
    #expect(throws: CommandRejection.self) { try server.handle(.uploadStarted(BlobKey(rawValue: long)), from: alice) }
    #expect(server == VideoServer())
  }

  @Test("videos tracked, in flight and uploads waiting are bounded per user; Bob's bounds are his own")
  func countBounds() throws {
    var limits = VideoServerLimits()
    limits.maximumVideosPerSender = 3
    limits.maximumVideosInFlightPerSender = 2
    limits.maximumUploadsPerUser = 2
    var server = VideoServer(limits: limits)
    let ids = (1...4).map { videoID($0) }
    _ = try server.handle(.uploaded(upload(ids[0], to: bob)), from: alice)
    _ = try server.handle(.uploaded(upload(ids[1], to: bob)), from: alice)
    #expect(throws: CommandRejection.self) { try server.handle(.uploaded(upload(ids[2], to: bob)), from: alice) }
    _ = try server.handle(.viewed(ids[0]), from: bob)
    _ = try server.handle(.uploaded(upload(ids[2], to: bob)), from: alice)
    _ = try server.handle(.viewed(ids[1]), from: bob)
    #expect(throws: CommandRejection.self) { try server.handle(.uploaded(upload(ids[3], to: bob)), from: alice) }
    _ = try server.handle(.deleted(ids[0]), from: alice)
    _ = try server.handle(.uploaded(upload(ids[3], to: bob)), from: alice)
    _ = try server.handle(.uploadStarted("videos/u1"), from: alice)
    _ = try server.handle(.uploadStarted("videos/u2"), from: alice)
    #expect(throws: CommandRejection.self) { try server.handle(.uploadStarted("videos/u3"), from: alice) }
    _ = try server.handle(.uploadStarted("videos/b1"), from: bob)
    _ = try server.handle(.uploaded(upload(videoID(9), to: alice)), from: bob)
  }

  @Test("released keys are remembered per user up to the bound, oldest forgotten first, alike live and decoded")
  func releasedKeysBounded() throws {
    var limits = VideoServerLimits()
    limits.maximumReleasedKeysPerUser = 2
    var server = VideoServer(limits: limits)
    let ids = (1...3).map { videoID($0) }
    for (index, id) in ids.enumerated() {
      _ = try server.handle(.uploaded(upload(id, to: bob)), from: alice, at: t0)
      _ = try server.handle(.deleted(id), from: alice, at: t0.advanced(by: .seconds(Int64(index))))
    }
    #expect(server.blobBindings[.forVideo(ids[0])] == nil)
    #expect(server.blobBindings[.forVideo(ids[1])]?.releasedAt != nil)
    let decoded = try JSONDecoder().decode(VideoServer.self, from: JSONEncoder().encode(server))
    #expect(decoded == server)
    var live = server
    var rebuilt = decoded
    let next = videoID(4)
    for machine in [0, 1] {
      let target = machine == 0 ? live : rebuilt
      var copy = target
      _ = try copy.handle(.uploaded(upload(next, to: bob)), from: alice, at: t0)
      _ = try copy.handle(.deleted(next), from: alice, at: t0.advanced(by: .seconds(9)))
      if machine == 0 { live = copy } else { rebuilt = copy }
    }
    #expect(live == rebuilt)
    #expect(live.blobBindings[.forVideo(ids[1])] == nil)
  }

  @Test("state written before keys were bound decodes: each tracked video claims its key")
  func legacyState() throws {
    let json = """
      {"videos":["v1",{"id":"v1","sender":"alice","recipient":"bob","blobKey":"videos/v1","size":3,
      "status":1,"blobReleased":false}],"pendingBlobDeletions":[],"droppedCommands":[],
      "uploadOwners":["videos/u","carol"]}
      """
    let server = try JSONDecoder().decode(VideoServer.self, from: Data(json.utf8))
    #expect(server.blobBindings["videos/v1"] == BlobBinding(owner: alice, video: "v1"))
    #expect(server.uploadOwner(of: "videos/u") == carol)
    #expect(server.mayRead("videos/v1", user: bob))
  }

  @Test("bytes are bounded per user: completed uploads and claimed videos count, released ones stop counting")
  func byteBounds() throws {
    var limits = VideoServerLimits()
    limits.maximumBytesPerUser = 1_000
    var server = VideoServer(limits: limits)
    _ = try server.handle(.uploadStarted("videos/a"), from: alice)
    _ = try server.handle(.uploadCompleted("videos/a", size: 600), from: alice)
    _ = try server.handle(.uploadStarted("videos/b"), from: alice)
    #expect(throws: CommandRejection.self) { try server.handle(.uploadCompleted("videos/b", size: 500), from: alice) }
    #expect(server.storedBytes(of: alice) == 600)
    // The notice must declare what was uploaded.
    let lying = VideoUpload(video: vid1, recipient: bob, blobKey: "videos/a", size: 1)
    #expect(throws: CommandRejection.self) { try server.handle(.uploaded(lying), from: alice) }
    _ = try server.handle(
      .uploaded(VideoUpload(video: vid1, recipient: bob, blobKey: "videos/a", size: 600)),
      from: alice
    )
    #expect(server.storedBytes(of: alice) == 600)
    // A notice naming a key never uploaded counts its declared size.
    #expect(throws: CommandRejection.self) {
      try server.handle(.uploaded(upload(vid2, to: bob, size: 401)), from: alice)
    }
    _ = try server.handle(.downloaded(vid1), from: bob)
    #expect(server.storedBytes(of: alice) == 0)
    _ = try server.handle(.uploadCompleted("videos/b", size: 500), from: alice)
    #expect(server.storedBytes(of: bob) == 0)
    // Bob cannot complete or abandon Alice's upload.
    #expect(throws: CommandRejection.self) { try server.handle(.uploadCompleted("videos/b", size: 1), from: bob) }
    #expect(throws: CommandRejection.self) { try server.handle(.uploadAbandoned("videos/b"), from: bob) }
    let decoded = try JSONDecoder().decode(VideoServer.self, from: JSONEncoder().encode(server))
    #expect(decoded.storedBytes(of: alice) == 500 && decoded.uploads(of: alice) == ["videos/b"])
  }

  @Test(
    "the janitor abandons a stranded upload for its uploader: its place and bytes are freed, its key never bound again"
  )
  func janitorAbandonsStranded() async throws {
    var limits = VideoServerLimits()
    limits.maximumUploadsPerUser = 1
    let server = EventServer(application: VideoServer(limits: limits))
    let blobs = InMemoryBlobStore()
    let key = BlobKey(rawValue: "videos/stranded")
    try await server.handle(.uploadStarted(key), from: alice)
    try await blobs.append(Data([1, 2, 3]), to: key, at: 0)
    try await blobs.complete(key, at: t0)
    try await server.handle(.uploadCompleted(key, size: 3), from: alice)
    await #expect(throws: EventAPIError.self) { try await server.handle(.uploadStarted("videos/next"), from: alice) }
    let janitor = VideoBlobJanitor(grace: .seconds(3600))
    #expect(try await janitor.run(server: server, blobs: blobs, now: t0.advanced(by: .seconds(60))) == [])
    #expect(try await janitor.run(server: server, blobs: blobs, now: t0.advanced(by: .seconds(3600))) == [key])
    #expect(try await blobs.list().isEmpty)
    let application = await server.application
    #expect(application.uploads(of: alice).isEmpty && application.storedBytes(of: alice) == 0)
    #expect(application.blobBindings[key]?.releasedAt != nil)
    try await server.handle(.uploadStarted("videos/next"), from: alice)
    await #expect(throws: EventAPIError.self) { try await server.handle(.uploadStarted(key), from: alice) }
  }

  @Test("a stranded upload whose abandonment the server could not decide keeps its file until a later run abandons it")
  func janitorKeepsUndecided() async throws {
    let server = EventServer(application: VideoServer())
    let blobs = InMemoryBlobStore()
    let key = BlobKey(rawValue: "videos/stranded")
    try await server.handle(.uploadStarted(key), from: alice)
    try await blobs.append(Data([1, 2, 3]), to: key, at: 0)
    try await blobs.complete(key, at: t0)
    let janitor = VideoBlobJanitor(grace: .seconds(60))
    let later = t0.advanced(by: .seconds(3600))
    // The uploader's partition is served by another node (or the database is down) for this run.
    let elsewhere = UnavailableCommands(ledger: InMemoryVideoBlobLedger(server: server))
    #expect(try await janitor.run(ledger: elsewhere, blobs: blobs, now: later) == [])
    #expect(try await blobs.size(of: key) == 3, "the file stays while its upload still counts as waiting")
    #expect(await server.application.blobBindings[key]?.isUploading == true)
    #expect(try await janitor.run(ledger: InMemoryVideoBlobLedger(server: server), blobs: blobs, now: later) == [key])
    #expect(await server.application.blobBindings[key]?.releasedAt != nil)
  }
}

/// A ledger whose commands cannot be decided now (``EventAPIError/serviceUnavailable(_:retryAfter:)``), its
/// questions answered by `ledger`.
private struct UnavailableCommands<Inner: VideoBlobLedger>: VideoBlobLedger {
  let ledger: Inner
  var limits: VideoServerLimits { get async { await ledger.limits } }
  func binding(of key: BlobKey) async throws -> BlobBinding? { try await ledger.binding(of: key) }
  func mayRead(_ key: BlobKey, user: UserID) async throws -> Bool { try await ledger.mayRead(key, user: user) }
  func usage(of user: UserID) async throws -> (storedBytes: Int, uploads: Set<BlobKey>) {
    try await ledger.usage(of: user)
  }
  func handle(_ command: VideoCommand, from user: UserID) async throws {
    throw EventAPIError.serviceUnavailable("served by another node", retryAfter: .seconds(1))
  }
  func unclaimedBlobs(in listing: [BlobInfo], now: Timestamp, grace: Duration) async throws -> [BlobKey] {
    try await ledger.unclaimedBlobs(in: listing, now: now, grace: grace)
  }
  func takeBlobDeletions() async throws -> [BlobKey] { try await ledger.takeBlobDeletions() }
}
