import EventProtocol
import EventServer
import Foundation
import TestScheduling
import Testing
import UpdateMachine
import VideoMessaging

/// One app, two update machines with different properties (seed 003's TODO): the durable video machine
/// (saved in a file, a day-long queue) and the ephemeral presence machine (held in memory, a two-minute
/// queue, no background polls), side by side.
@Suite("VideoMessaging: a durable machine and an ephemeral one in one app", .hangGuard)
struct TwoMachinesTests {
  typealias VideoMachine = UpdateMachine<VideoSnapshot, VideoEvent, VideoCommand>
  typealias PresenceMachine = UpdateMachine<PresenceSnapshot, PresenceEvent, PresenceCommand>

  /// Bob's app: his videos, saved at `url`, and who is recording to him, kept in memory.
  struct App {
    let videos: VideoMachine
    let presence: PresenceMachine

    init(
      user: UserID,
      videoServer: EventServer<VideoServer, ContinuousClock>,
      presenceServer: EventServer<RecordingPresence, ContinuousClock>,
      url: URL
    ) {
      videos = VideoMachine(
        reducer: VideoReducer(),
        transport: InProcessTransport(server: videoServer, user: user, throughWire: true),
        store: FileStore(url: url)
      )
      presence = PresenceMachine(
        reducer: PresenceReducer(),
        transport: InProcessTransport(server: presenceServer, user: user, throughWire: true),
        store: InMemoryStore(),
        configuration: PresenceReducer.configuration
      )
    }

    func start() async {
      await videos.start()
      await presence.start()
    }

    func stop() async {
      await videos.stop()
      await presence.stop()
    }
  }

  @Test("alice records to bob: bob sees it live; the video arrives; after a restart only the video is kept")
  func sideBySide() async throws {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("two-machines-\(UUID()).json")
    defer {
      try? FileManager.default.removeItem(at: url)
      try? FileManager.default.removeItem(at: url.appendingPathExtension("journal"))
    }
    let videoServer = EventServer(application: VideoServer())
    let presenceServer = EventServer(application: RecordingPresence())
    let alice = App(
      user: "alice",
      videoServer: videoServer,
      presenceServer: presenceServer,
      url: url.appendingPathExtension("alice")
    )
    defer { try? FileManager.default.removeItem(at: url.appendingPathExtension("alice")) }
    var bob = App(user: "bob", videoServer: videoServer, presenceServer: presenceServer, url: url)
    await alice.start()
    await bob.start()
    _ = await bob.presence.waitUntilLive()

    _ = await alice.presence.submit(.recording(to: "bob"))
    let recording = await bob.presence.firstSnapshot { $0.state?.recordingToMe == ["alice"] }
    #expect(recording != nil)
    let video: VideoID = "1700000000000-0123456789abcdef01234567"
    _ = await alice.videos.submit(
      .uploaded(VideoUpload(video: video, recipient: "bob", blobKey: .forVideo(video), size: 10))
    )
    _ = await alice.presence.submit(.stopped(to: "bob"))
    _ = await bob.presence.firstSnapshot { $0.state?.recordingToMe == [] }
    let delivered = await bob.videos.firstSnapshot { $0.state?.incoming.map(\.id) == [video] }
    #expect(delivered != nil)

    // Bob's app restarts: the video machine comes back from its file, the presence machine from nothing.
    _ = await alice.presence.submit(.recording(to: "bob"))
    _ = await bob.presence.firstSnapshot { $0.state?.recordingToMe == ["alice"] }
    await bob.stop()
    bob = App(user: "bob", videoServer: videoServer, presenceServer: presenceServer, url: url)
    await bob.start()
    #expect(await bob.videos.snapshot.state?.incoming.map(\.id) == [video], "restored from the file before any request")
    let fresh = await bob.presence.firstSnapshot { $0.state?.recordingToMe == ["alice"] }
    #expect(fresh?.metrics.registers == 1, "nothing kept: a new queue, a fresh snapshot")
    #expect(await bob.videos.snapshot.metrics.registers == 0, "the video machine resumed its saved queue")
    await alice.stop()
    await bob.stop()
  }

  @Test("a recording whose sender went quiet ends on the server's clock")
  func quietRecordingEnds() throws {
    var presence = RecordingPresence(staleAfter: .seconds(30))
    let t0 = Timestamp(secondsSinceEpoch: 1_700_000_000)
    let started = try presence.handle(.recording(to: "bob"), from: "alice", at: t0)
    #expect(started == [Delivery(to: ["bob"], event: .recording(PresenceChange(sender: "alice", active: true)))])
    #expect(try presence.handle(.recording(to: "bob"), from: "alice", at: t0.advanced(by: .seconds(20))).isEmpty)
    #expect(presence.nextDeadline == t0.advanced(by: .seconds(50)))
    #expect(presence.deadlineReached(at: t0.advanced(by: .seconds(49))).isEmpty)
    let ended = presence.deadlineReached(at: t0.advanced(by: .seconds(50)))
    #expect(ended == [Delivery(to: ["bob"], event: .recording(PresenceChange(sender: "alice", active: false)))])
    #expect(presence.snapshot(for: "bob") == PresenceSnapshot())
  }
}
