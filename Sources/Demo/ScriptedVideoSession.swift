import EventProtocol
import EventServer
import Foundation
import UpdateMachine
import UpdateMachineTesting
import VideoMessaging

/// A scripted session of the video domain on a manual clock: Alice records a video for Bob; its file goes
/// to blob storage and its notice through her outbox; Bob's phone, in the background, misses the push,
/// finds the video at its next background poll, fails once mid-download and resumes from its offset;
/// Alice sees downloaded, then viewed; the server's janitor deletes the blob. Every line says the same on
/// every run (a step's time may move by a tenth of a second when it waits for one of the engine's timers).
struct ScriptedVideoSession {
  let clock = ManualClock()
  let seed: UInt64
  var output: ScriptedSessionOutput = { print($0) }

  func run() async throws {
    output("\nScripted session of the video domain (two users, in process, manual clock)\n")
    let start = clock.now
    func say(_ line: String) {
      output("[t=\(String(format: "%7.3f", start.duration(to: clock.now).inSeconds))s] \(line)")
    }
    let gateway = InMemoryPushGateway()
    let server = EventServer(
      application: VideoServer(),
      clock: clock,
      anchor: start,
      random: SeededRandomNumberGenerator(seed: seed),
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
        anchor: start,
        seed: seed,
        chunkSize: 64 << 10
      )
    }
    let alice = device("alice", seed: seed &+ 10)
    let bob = device("bob", seed: seed &+ 20)
    await alice.start()
    await bob.start()
    try await waitFor(alice) { $0.freshness.freshness == .live }
    try await waitFor(bob) { $0.freshness.freshness == .live }
    say("alice and bob are live (registered, long-polling)")
    try await server.registerPushToken("bob-phone", user: "bob", clientID: await bob.machine.clientID!)
    await bob.machine.enteredBackground()
    say("bob puts his phone away: no long-poll; a push token is registered for it")
    let bobEvents = await bob.events()

    let recording = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    let video = await alice.send(recording, to: "bob")
    say("alice records video \(video.rawValue.prefix(13))… (300 kB): shown as sending")
    try await waitFor(alice) { $0.confirmedState?.outgoing.first?.status == .uploaded }
    say("the file is in blob storage and the notice went through her outbox: alice sees uploaded")
    await gateway.waitForPushes(count: 1)
    say("the server pushes to bob's phone (\(gateway.sent[0].payload.count) bytes) — and the push is lost")

    blobStorage.failNext(1, after: 2)
    clock.advance(by: .seconds(15 * 60))
    say("15 minutes later bob's background poll finds the video and starts downloading it")
    var events = bobEvents.makeAsyncIterator()
    guard case .retrying(_, let retryAt) = try await nextTransferOutcome(&events) else {
      throw ScriptedSessionError(description: "bob's download did not fail after two chunks")
    }
    let wait = Int(clock.now.duration(to: retryAt).inSeconds * 1000)
    say("blob storage fails after two 64 kB chunks; the download retries in \(wait) ms from its offset")
    clock.advance(to: retryAt)
    guard case .delivered(let delivered) = try await nextTransferOutcome(&events) else {
      throw ScriptedSessionError(description: "bob's resumed download was not delivered")
    }
    say(
      "resumed and complete: \(delivered.video.size / 1000) kB handed to bob's app, \(blobStorage.bytesRead / 1000) kB read in all"
    )
    try await waitFor(alice) { $0.confirmedState?.outgoing.first?.status == .downloaded }
    say("bob's `downloaded` went through his outbox: alice's long-poll shows downloaded")

    await bob.machine.enteredForeground()
    await bob.markViewed(video)
    try await waitFor(alice) { $0.confirmedState?.outgoing.first?.status == .viewed }
    say("bob opens the app and watches it: alice sees viewed")
    let deleted = try await VideoBlobJanitor().run(server: server, blobs: blobStorage, now: clock.now)
    say(
      "the server's janitor deletes the downloaded video's blob (\(deleted.count) deleted, \(blobStorage.keys.count) left)"
    )
    let metrics = await bob.machine.snapshot.metrics
    say("bob's engine: registers \(metrics.registers), polls \(metrics.polls), submits \(metrics.submits)")
    await alice.stop()
    await bob.stop()
  }

  /// The first snapshot of `device` that meets `condition`. A step may wait for one of the engine's own
  /// timers (an outbox retry, a background poll), which on the manual clock fire only when time moves: when
  /// no snapshot meets it for a moment (200 ms of real time), the clock moves on by 100 ms, up to a minute of
  /// the session's time: a step that waits for a timer must not depend on the machine being fast enough for
  /// the snapshot to come before the check. The lines say what happened, not when, so they stay the same.
  @discardableResult
  private func waitFor(
    _ device: VideoDevice,
    _ condition: @escaping @Sendable (UpdateMachineSnapshot<VideoSnapshot, VideoCommand>) -> Bool
  ) async throws -> UpdateMachineSnapshot<VideoSnapshot, VideoCommand> {
    let machine = await device.machine
    let user = await device.user
    let clock = clock
    return try await withThrowingTaskGroup(of: UpdateMachineSnapshot<VideoSnapshot, VideoCommand>?.self) { group in
      group.addTask {
        for await snapshot in await machine.snapshots() where condition(snapshot) { return snapshot }
        return nil
      }
      group.addTask {
        for _ in 0..<600 {
          try await Task.sleep(for: .milliseconds(200))
          clock.advance(by: .milliseconds(100))
        }
        return nil
      }
      defer { group.cancelAll() }
      guard let snapshot = try await group.next() ?? nil else {
        throw ScriptedSessionError(description: "\(user)'s machine did not reach the session's next step")
      }
      return snapshot
    }
  }

  /// The next event that ends a download try (a retry, a delivery or an abandon), past the progress reports
  /// each chunk makes.
  private func nextTransferOutcome(
    _ events: inout AsyncStream<VideoDeviceEvent>.Iterator
  ) async throws -> VideoDeviceEvent {
    while let event = await events.next() {
      if case .progressed = event { continue }
      return event
    }
    throw ScriptedSessionError(description: "bob's device stopped reporting its transfers")
  }
}
