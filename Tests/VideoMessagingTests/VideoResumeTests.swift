import EventProtocol
import EventServer
import Foundation
import TestScheduling
import Testing
import UpdateMachine
import UpdateMachineTesting
import VideoMessaging

@Suite("VideoMessaging: downloads resume from their offset, and each video is delivered once", .hangGuard)
struct VideoResumeTests {
  struct Rig {
    let clock = ManualClock()
    let server: EventServer<VideoServer, ManualClock>
    let blobStorage = InMemoryBlobStore()
    let record = InMemoryStore()
    let bobsFiles = InMemoryBlobStore()

    init() {
      server = EventServer(
        application: VideoServer(),
        clock: clock,
        anchor: clock.now,
        random: SeededRandomNumberGenerator(seed: 8)
      )
    }

    func bob(seed: UInt64) -> VideoDevice {
      VideoDevice(
        user: "bob",
        transport: InProcessTransport(server: server, user: "bob"),
        store: record,
        remoteBlobs: blobStorage,
        localBlobs: bobsFiles,
        clock: clock,
        anchor: clock.now,
        seed: seed,
        chunkSize: 100
      )
    }

    /// Alice's three videos, already in blob storage and announced.
    func announceVideos() async throws -> [VideoID] {
      var videos: [VideoID] = []
      for index in 0..<3 {
        let video = videoID(Int64(index))
        blobStorage.put(Data(repeating: UInt8(index), count: 1_000), at: .forVideo(video), createdAt: clock.now)
        try await server.handle(.uploaded(upload(video, to: "bob")), from: "alice")
        videos.append(video)
      }
      return videos
    }
  }

  @Test("a download that fails part-way resumes from the bytes it has; every byte is fetched once")
  func resumeAfterFailure() async throws {
    let rig = Rig()
    let videos = try await rig.announceVideos()
    rig.blobStorage.failNext(1, after: 3)
    let bob = rig.bob(seed: 1)
    let events = await bob.events()
    await bob.start()
    var delivered: [VideoID] = []
    for await event in events {
      switch event {
      case .retrying(_, let retryAt): rig.clock.advance(to: retryAt)
      case .delivered(let video): delivered.append(video.video.id)
      case .abandoned(let video, let reason): Issue.record("\(video) abandoned: \(reason)")
      case .progressed: break
      }
      if delivered.count == videos.count { break }
    }
    #expect(delivered.sorted() == videos)
    #expect(Set(delivered).count == delivered.count)
    #expect(rig.blobStorage.bytesRead == 3_000)
    #expect(await bob.library.map(\.video.id).sorted() == videos)
    for video in videos {
      #expect(try await rig.bobsFiles.size(of: TransferQueue.localKey(for: video)) == 1_000)
    }
    await bob.stop()
  }

  @Test("a download interrupted by the app being killed resumes after the restart, and nothing is delivered twice")
  func resumeAfterRestart() async throws {
    let rig = Rig()
    let videos = try await rig.announceVideos()
    rig.blobStorage.failNext(1, after: 14)  // the first video's ten reads, then four of the second's
    let first = rig.bob(seed: 1)
    let firstEvents = await first.events()
    await first.start()
    var delivered: [VideoID] = []
    for await event in firstEvents {
      if case .delivered(let video) = event { delivered.append(video.video.id) }
      if case .retrying = event { break }
    }
    #expect(delivered == [videos[0]])
    await first.stop()
    let partial = try await rig.bobsFiles.partialLength(TransferQueue.localKey(for: videos[1]))
    #expect(partial == 400)

    let second = rig.bob(seed: 2)
    let secondEvents = await second.events()
    await second.start()
    for await event in secondEvents {
      if case .delivered(let video) = event { delivered.append(video.video.id) }
      if delivered.count == videos.count { break }
    }
    #expect(delivered.sorted() == videos)
    #expect(Set(delivered).count == delivered.count)
    #expect(rig.blobStorage.bytesRead == 3_000)
    #expect(await second.library.map(\.video.id).sorted() == videos)
    await second.stop()
  }

  @Test("downloaded applied but its answer lost, then a re-register: the library keeps it, no second download")
  func downloadedThenReregistered() {
    var queue = TransferQueue(seed: 1)
    let video = videoID(1)
    _ = queue.incomingConfirmed([incoming(video, from: "alice")], now: t0)
    _ = queue.downloadFinished(video, now: t0)
    // The new snapshot no longer lists it: the server applied `downloaded`.
    #expect(queue.incomingConfirmed([], now: t0) == [.save])
    #expect(queue.library.map(\.video.id) == [video])
    #expect(queue.downloads.isEmpty && queue.completedIDs.isEmpty)
  }
}
