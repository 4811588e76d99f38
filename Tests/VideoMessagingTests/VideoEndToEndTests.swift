import EventProtocol
import EventServer
import Foundation
import Synchronization
import TestScheduling
import Testing
import UpdateMachine
import UpdateMachineTesting
import VideoMessaging

/// Waits, without sleeping, for a snapshot of `device`'s machine that satisfies `condition`.
@discardableResult
private func waitFor(
  _ device: VideoDevice,
  _ condition: @Sendable (UpdateMachineSnapshot<VideoSnapshot, VideoCommand>) -> Bool
) async -> UpdateMachineSnapshot<VideoSnapshot, VideoCommand>? {
  for await snapshot in await device.machine.snapshots() where condition(snapshot) { return snapshot }
  return nil
}

@Suite(
  "VideoMessaging end to end: two users, in process, with a lost push and a failed download",
  .hangGuard
)
struct VideoEndToEndTests {
  @Test("record → upload → uploaded → download (after a lost push and a failure) → downloaded → view → viewed")
  func endToEnd() async throws {
    let clock = ManualClock()
    let gateway = InMemoryPushGateway()
    let server = EventServer(
      application: VideoServer(),
      clock: clock,
      anchor: clock.now,
      random: SeededRandomNumberGenerator(seed: 3),
      pushGateway: gateway
    )
    let blobStorage = InMemoryBlobStore()
    func device(_ user: UserID, seed: UInt64) -> VideoDevice {
      VideoDevice(
        user: user,
        transport: InProcessTransport(server: server, user: user, throughWire: true),
        store: InMemoryStore(),
        remoteBlobs: blobStorage,
        localBlobs: InMemoryBlobStore(),
        clock: clock,
        anchor: clock.now,
        seed: seed,
        chunkSize: 256
      )
    }
    let alice = device("alice", seed: 1)
    let bob = device("bob", seed: 2)
    await alice.start()
    await bob.start()
    await waitFor(alice) { $0.freshness.freshness == .live }
    await waitFor(bob) { $0.freshness.freshness == .live }
    let bobClient = try #require(await bob.machine.clientID)
    try await server.registerPushToken("bob-phone", user: "bob", clientID: bobClient)
    await bob.machine.enteredBackground()
    let bobEvents = await bob.events()

    // Alice records a video: the file goes to blob storage, then `uploaded` through the outbox.
    let recording = Data((0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    let video = await alice.send(recording, to: "bob")
    let uploaded = await waitFor(alice) { $0.confirmedState?.outgoing(to: "bob").first?.status == .uploaded }
    #expect(uploaded?.state?.outgoing == [OutgoingVideo(id: video, recipient: "bob", status: .uploaded)])
    #expect(blobStorage.data(at: .forVideo(video)) == recording)

    // The server pushes to bob's phone (not long-polling); the push is lost on the way.
    await gateway.waitForPushes(count: 1)
    #expect(gateway.sent.map(\.token) == ["bob-phone"])

    // Bob's background poll, 15 minutes later, finds the video; the first download attempt fails.
    blobStorage.failNext(1)
    clock.advance(by: .seconds(15 * 60))
    var events = bobEvents.makeAsyncIterator()
    guard case .retrying(video, let retryAt)? = await events.nextSkippingProgress() else {
      Issue.record("the failed download was not reported")
      return
    }
    clock.advance(to: retryAt)
    guard case .delivered(let delivered)? = await events.nextSkippingProgress() else {
      Issue.record("the video was not delivered")
      return
    }
    #expect(delivered.video.id == video)
    #expect(await bob.library.map(\.video.id) == [video])

    // The `downloaded` notice reaches the server; Alice's long-poll shows it.
    await waitFor(alice) { $0.confirmedState?.outgoing.first?.status == .downloaded }

    // Bob opens the app and watches it; Alice sees `viewed`.
    await bob.machine.enteredForeground()
    await waitFor(bob) { $0.pendingMutations.isEmpty && $0.confirmedState?.incoming.isEmpty == true }
    await bob.markViewed(video)
    let viewed = await waitFor(alice) { $0.confirmedState?.outgoing.first?.status == .viewed }
    #expect(viewed?.state?.outgoing == [OutgoingVideo(id: video, recipient: "bob", status: .viewed)])

    // The server released the blob once downloaded; the janitor deletes it.
    let deleted = try await VideoBlobJanitor().run(server: server, blobs: blobStorage, now: clock.now)
    #expect(deleted == [.forVideo(video)])
    #expect(blobStorage.keys.isEmpty)
    await alice.stop()
    await bob.stop()
  }

  @Test("a push whose events continue the finger is applied with no request")
  func pushCarriesEvents() async throws {
    let clock = ManualClock()
    let gateway = InMemoryPushGateway()
    let server = EventServer(application: VideoServer(), clock: clock, anchor: clock.now, pushGateway: gateway)
    let bob = Self.bob(on: server, clock: clock, seed: 5)
    await bob.start()
    await waitFor(bob) { $0.freshness.freshness == .live }
    try await server.registerPushToken("bob-phone", user: "bob", clientID: try #require(await bob.machine.clientID))
    await bob.machine.enteredBackground()
    let polls = await bob.machine.snapshot.metrics.polls
    let video = videoID(5)
    try await server.handle(.uploaded(upload(video, to: "bob")), from: "alice")
    await gateway.waitForPushes(count: 1)
    let payload = try JSONDecoder().decode(PushPayload<VideoEvent>.self, from: Data(gateway.sent[0].payload))
    await bob.machine.pushReceived(payload)
    let applied = await waitFor(bob) { $0.confirmedState?.incoming.map(\.id) == [video] }
    #expect(applied?.metrics.pushesApplied == 1)
    #expect(applied?.metrics.polls == polls)
    await bob.stop()
  }

  @Test("the engine's events reach the log the device was given (video-client prints them)")
  func engineLog() async throws {
    let clock = ManualClock()
    let server = EventServer(application: VideoServer(), clock: clock, anchor: clock.now)
    let logged = Mutex<[UpdateMachineLogEvent]>([])
    let bob = Self.bob(on: server, clock: clock, seed: 6) { event in logged.withLock { $0.append(event) } }
    await bob.start()
    await waitFor(bob) { $0.freshness.freshness == .live }
    await bob.stop()
    let events = logged.withLock { $0 }
    let registers = events.filter {
      if case .requestSucceeded(_, .register) = $0 { return true }
      return false
    }
    #expect(registers.count == 1, "\(events)")
  }

  /// Bob's device on `server` in process, on stores of its own, its engine's events given to `log`.
  private static func bob(
    on server: EventServer<VideoServer, ManualClock>,
    clock: ManualClock,
    seed: UInt64,
    log: (@Sendable (UpdateMachineLogEvent) -> Void)? = nil
  ) -> VideoDevice {
    VideoDevice(
      user: "bob",
      transport: InProcessTransport(server: server, user: "bob"),
      store: InMemoryStore(),
      remoteBlobs: InMemoryBlobStore(),
      localBlobs: InMemoryBlobStore(),
      clock: clock,
      anchor: clock.now,
      seed: seed,
      log: log
    )
  }
}
