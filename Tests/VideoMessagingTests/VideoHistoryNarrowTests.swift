import EventProtocol
import EventServer
import TestScheduling
import Testing
import UpdateMachine
import UpdateMachineTesting
import VideoMessaging

/// Conversation histories through the engine: devices fetch `dm:a,b` pages at any anchor while videos
/// are sent (with or without a caption), captioned again, downloaded, viewed, deleted and trimmed, under
/// the loopback world's faults; once settled,
/// every video a device knows equals the server's and every complete range is the server's history.
@Suite("VideoMessaging: conversation histories fetched by page and kept live", .serialized)
struct VideoHistoryNarrowTests {
  @Test("histories settle true to the server under faults", .cpuBound, arguments: 0..<40 as Range<UInt64>)
  func historiesSettle(seed: UInt64) {
    var retention = VideoRetention()
    retention.historyPerConversation = 6
    var world = LoopbackWorld(
      application: VideoServer(retention: retention),
      reducer: { _ in VideoReducer() },
      devices: [alice, bob, bob],
      seed: seed
    )
    var random = SeededRandomNumberGenerator(seed: seed &+ 31)
    var sent: [VideoID] = []
    var fetched = 0
    for step in 0..<300 {
      let device = Int.random(in: world.devices.indices, using: &random)
      let me = world.devices[device].user
      let friend: UserID = me == alice ? bob : alice
      switch Int.random(in: 0..<10, using: &random) {
      case 0..<5:
        world.chaoticStep()
      case 5, 6:
        let video = VideoID.make(at: t0.advanced(by: .seconds(Int64(step))), using: &random)
        sent.append(video)
        var notice = upload(video, to: friend, size: step)
        notice.caption = Bool.random(using: &random) ? "sent \(step)" : nil
        world.submit(.uploaded(notice), on: device)
      case 7:
        guard let video = sent.randomElement(using: &random) else { continue }
        let caption = ["", "edit \(step)", "edit \(step % 3)"].randomElement(using: &random)!
        let command: VideoCommand = [
          .downloaded(video), .viewed(video), .deleted(video), .captioned(video, caption: caption),
          .captioned(video, caption: caption),
        ].randomElement(using: &random)!
        world.submit(command, on: device)
      default:
        let anchor: FetchAnchor =
          Bool.random(using: &random) ? .newest : .position(Int.random(in: 1...max(1, sent.count), using: &random))
        world.fetch(
          FetchRequest(
            narrow: VideoHistory.conversation(between: me, and: friend),
            anchor: anchor,
            before: Int.random(in: 0...3, using: &random),
            after: Int.random(in: 0...3, using: &random)
          ),
          on: device
        )
        fetched += 1
      }
    }
    let settled = world.runUntilSettled(maximumSteps: 20_000)
    #expect(settled, "seed \(seed) did not settle: \(world.trace.suffix(20).joined(separator: "\n"))")
    #expect(fetched > 0)
    #expect(world.fetchOutcomes.values.contains { $0.values.contains(.merged) }, "no page was merged")
  }

  @Test("a user cannot fetch a conversation they are not in")
  func foreignConversationRefused() {
    let server = VideoServer()
    #expect(throws: CommandRejection.self) {
      try server.fetch(
        FetchRequest(narrow: VideoHistory.conversation(between: bob, and: carol), anchor: .newest, before: 5, after: 0),
        for: alice
      )
    }
    #expect(throws: CommandRejection.self) {
      try server.fetch(
        FetchRequest(narrow: Narrow([NarrowTerm("dm", "alice,bob,carol")]), anchor: .oldest, before: 0, after: 5),
        for: alice
      )
    }
  }

  @Test("a retired video's id stays taken while its history keeps it: a repeat is a no-op, another sender is refused")
  func retiredIDStaysTaken() throws {
    var server = VideoServer()
    let video = videoID(1)
    _ = try server.handle(.uploaded(upload(video, to: bob)), from: alice, at: t0)
    _ = try server.handle(.downloaded(video), from: bob, at: t0)
    let retired = server.deadlineReached(at: t0.advanced(by: server.retention.afterDownloaded))
    #expect(retired.map(\.event) == [.untracked(VideoGone(video: video, reason: .retired))])
    #expect(server.videos[video] == nil && server.history[video] != nil)
    let before = server
    // Alice's outbox retrying the notice long after: nothing changes, nothing is sent.
    #expect(
      try server.handle(.uploaded(upload(video, to: bob)), from: alice, at: t0.advanced(by: .seconds(99))).isEmpty
    )
    #expect(server.videos == before.videos && server.history == before.history)
    #expect(throws: CommandRejection.self) {
      try server.handle(.uploaded(upload(video, to: carol)), from: carol, at: t0.advanced(by: .seconds(99)))
    }
    #expect(server.history == before.history)
  }

  @Test("an old video on screen changes live: viewed, then deleted")
  func oldVideoChangesLive() {
    var world = LoopbackWorld(
      application: VideoServer(),
      reducer: { _ in VideoReducer() },
      devices: [alice, bob],
      seed: 5,
      faults: .none
    )
    var random = SeededRandomNumberGenerator(seed: 9)
    let videos = (0..<5).map { VideoID.make(at: t0.advanced(by: .seconds(Int64($0))), using: &random) }
    for video in videos { world.submit(.uploaded(upload(video, to: bob)), on: 0) }
    #expect(settle(&world))
    // Bob looks at the two oldest videos only.
    world.fetch(
      FetchRequest(narrow: VideoHistory.conversation(between: bob, and: alice), anchor: .oldest, before: 0, after: 2),
      on: 1
    )
    #expect(settle(&world))
    #expect(
      world.devices[1].core.confirmedState!.history.list(VideoHistory.conversation(between: bob, and: alice)).items.map(
        \.video
      ) == Array(videos.prefix(2))
    )
    #expect(world.devices[1].core.confirmedState!.history.item(videos[4]) == .unknown)
    world.submit(.viewed(videos[0]), on: 1)
    #expect(settle(&world))
    #expect(world.devices[1].core.confirmedState!.history.item(videos[0]).item?.status == .viewed)
    world.submit(.deleted(videos[1]), on: 0)
    #expect(settle(&world))
    #expect(world.devices[1].core.confirmedState!.history.item(videos[1]) == .unknown)
    #expect(
      world.devices[1].core.confirmedState!.history.list(VideoHistory.conversation(between: bob, and: alice)).items.map(
        \.video
      ) == [videos[0]]
    )
  }
}

private func settle<A, R>(_ world: inout LoopbackWorld<A, R>) -> Bool {
  world.runUntilSettled(maximumSteps: 5_000)
}
