import EventProtocol
import EventServer
import Foundation
import Testing
import UpdateMachine

@testable import VideoMessaging

/// A video's life as its users judge it, through the real server core: every device of the recipient
/// learns "viewed", a video sent to yourself reports each change once, and the server forgets old videos on
/// its own clock (durably).
@Suite("VideoServer: every device told, each status once, retention")
struct VideoLifecycleTests {
  typealias Machine = EventServerStateMachine<VideoServer>

  let vid1 = videoID(1)
  let vid2 = videoID(2)

  func makeMachine(retention: VideoRetention = VideoRetention()) -> Machine {
    var machine = Machine(
      application: VideoServer(retention: retention),
      configuration: EventServerConfiguration(),
      random: SeededRandomNumberGenerator(seed: 5),
      now: t0
    )
    machine.startRecording()
    return machine
  }

  /// A device: its queue and its copy of the state, kept by the real reducer from the queue's events.
  struct Device {
    var queueID: QueueID
    var state: VideoSnapshot
    var applied = 0

    init(_ user: UserID, on machine: inout Machine, now: Timestamp) {
      let (registration, _) = machine.register(user: user, eventTypes: nil, lifespan: nil, clientID: nil, now: now)
      queueID = registration.queueID
      state = registration.snapshot
    }

    /// Applies the events queued since the last call; returns them.
    @discardableResult
    mutating func sync(_ machine: Machine) throws -> [VideoEvent] {
      let events = machine.queue(queueID)!.events.compactMap { envelope -> VideoEvent? in
        if case .payload(let event) = envelope.body { event } else { nil }
      }
      let new = Array(events.dropFirst(applied))
      applied = events.count
      for event in new { try VideoReducer().apply(event, to: &state) }
      return new
    }
  }

  @Test("viewed on the phone: the tablet learns it too, and the sender")
  func viewedReachesEveryDeviceOfTheRecipient() throws {
    var machine = makeMachine()
    var phone = Device(bob, on: &machine, now: t0)
    var tablet = Device(bob, on: &machine, now: t0)
    var sender = Device(alice, on: &machine, now: t0)
    _ = try machine.handle(.uploaded(upload(vid1, to: bob)), from: alice, now: t0)
    _ = try machine.handle(.downloaded(vid1), from: bob, now: t0)
    for device in [phone, tablet] {
      var device = device
      try device.sync(machine)
      #expect(device.state.received == [ReceivedVideo(id: vid1, sender: alice, status: .downloaded)])
    }
    try phone.sync(machine)
    try tablet.sync(machine)
    _ = try machine.handle(.viewed(vid1), from: bob, now: t0)
    #expect(try tablet.sync(machine) == [.status(VideoStatusChanged(video: vid1, status: .viewed))])
    #expect(tablet.state.received == [ReceivedVideo(id: vid1, sender: alice, status: .viewed)])
    try phone.sync(machine)
    try sender.sync(machine)
    #expect(phone.state == machine.application.snapshot(for: bob))
    #expect(tablet.state == machine.application.snapshot(for: bob))
    #expect(sender.state.outgoing == [OutgoingVideo(id: vid1, recipient: bob, status: .viewed)])
  }

  @Test("a video sent to yourself reports each change once")
  func sentToYourselfOnce() throws {
    var machine = makeMachine()
    var device = Device(alice, on: &machine, now: t0)
    var perChange: [Int] = []
    for command in [VideoCommand.uploaded(upload(vid1, to: alice)), .downloaded(vid1), .viewed(vid1), .deleted(vid1)] {
      _ = try machine.handle(command, from: alice, now: t0)
      let events = try device.sync(machine)
      perChange.append(events.count)
      #expect(device.state == machine.application.snapshot(for: alice), "after \(command)")
      if case .uploaded = command {
        #expect(device.state.outgoing.map(\.id) == [vid1] && device.state.incoming.map(\.id) == [vid1])
      }
      if case .viewed = command {
        #expect(device.state.outgoing.map(\.status) == [.viewed])
        #expect(device.state.received == [ReceivedVideo(id: vid1, sender: alice, status: .viewed)])
      }
    }
    #expect(perChange == [1, 1, 1, 1])
    #expect(device.state == VideoSnapshot())
  }

  @Test("the recipient hears why a video stopped waiting: downloaded, viewed, deleted")
  func goneReasons() throws {
    var server = VideoServer()
    let vid3 = videoID(3)
    for video in [vid1, vid2, vid3] { _ = try server.handle(.uploaded(upload(video, to: bob)), from: alice, at: t0) }
    let gone = { (deliveries: [Delivery<VideoEvent>]) -> VideoGoneReason? in
      deliveries.compactMap { if case .incomingGone(let gone) = $0.event { gone.reason } else { nil } }.first
    }
    #expect(gone(try server.handle(.downloaded(vid1), from: bob, at: t0)) == .downloaded)
    #expect(gone(try server.handle(.viewed(vid2), from: bob, at: t0)) == .viewed)
    #expect(gone(try server.handle(.deleted(vid3), from: alice, at: t0)) == .deleted)
    // Deleting a video the recipient already has tells both users, as untracked.
    let deleted = try server.handle(.deleted(vid1), from: alice, at: t0)
    #expect(deleted == [Delivery(to: [alice, bob], event: .untracked(VideoGone(video: vid1, reason: .deleted)))])
  }

  @Test("retention: unwatched videos expire, viewed ones are retired, on the server's own clock and durably")
  func retention() throws {
    // Minutes instead of days, so the devices' queues (idle for at most 10 minutes) live through it.
    let minute = Duration.seconds(60)
    var machine = makeMachine(
      retention: VideoRetention(waitingForDownload: minute * 5, afterDownloaded: minute * 5, afterViewed: minute * 2)
    )
    var sender = Device(alice, on: &machine, now: t0)
    var recipient = Device(bob, on: &machine, now: t0)
    _ = try machine.handle(.uploaded(upload(vid1, to: bob)), from: alice, now: t0)
    _ = try machine.handle(.uploaded(upload(vid2, to: bob)), from: alice, now: t0)
    _ = try machine.handle(.viewed(vid2), from: bob, now: t0.advanced(by: minute))
    #expect(machine.application.nextDeadline == t0.advanced(by: minute * 3))
    #expect(machine.nextDeadline <= t0.advanced(by: minute * 3))

    // The viewed video is retired 2 minutes after its view; both users are told.
    _ = machine.timerFired(now: t0.advanced(by: minute * 3))
    #expect(machine.application.videos.keys.sorted() == [vid1])
    let retired = VideoEvent.untracked(VideoGone(video: vid2, reason: .retired))
    #expect(try sender.sync(machine).last == retired)
    #expect(try recipient.sync(machine).last == retired)

    // The video nobody downloaded expires after 5 minutes; its blob is released.
    _ = machine.timerFired(now: t0.advanced(by: minute * 5))
    #expect(machine.application.videos.isEmpty)
    #expect(machine.application.pendingBlobDeletions.contains(.forVideo(vid1)))
    #expect(!machine.application.mayRead(.forVideo(vid1), user: bob))
    #expect(try sender.sync(machine).last == .untracked(VideoGone(video: vid1, reason: .expired)))
    #expect(try recipient.sync(machine).last == .incomingGone(VideoGone(video: vid1, reason: .expired)))
    #expect(sender.state == VideoSnapshot() && recipient.state == VideoSnapshot())
    #expect(machine.application.nextDeadline == nil)

    // A server rebuilt from its log forgets the same videos at the same times.
    let records = try machine.takeRecordedEntries().enumerated().map { index, entry in
      StoredRecord(position: UInt64(index + 1), bytes: try ServerLogCodec.encode(entry))
    }
    let (rebuilt, _) = try Machine.rebuilding(
      from: StoredLog(snapshot: nil, records: records),
      application: VideoServer(
        retention: VideoRetention(waitingForDownload: minute * 5, afterDownloaded: minute * 5, afterViewed: minute * 2)
      ),
      configuration: machine.configuration,
      random: SeededRandomNumberGenerator(seed: 0),
      now: t0
    )
    #expect(rebuilt.application == machine.application)
    #expect(rebuilt.dump() == machine.dump())
  }

  @Test("a snapshot keeps the deadlines: a server decoded mid-retention retires on time")
  func retentionSurvivesSnapshot() throws {
    var server = VideoServer(
      retention: VideoRetention(
        waitingForDownload: .seconds(60),
        afterDownloaded: .seconds(120),
        afterViewed: .seconds(30)
      )
    )
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice, at: t0)
    _ = try server.handle(.uploaded(upload(vid2, to: bob)), from: alice, at: t0)
    _ = try server.handle(.downloaded(vid2), from: bob, at: t0.advanced(by: .seconds(10)))
    var decoded = try JSONDecoder().decode(VideoServer.self, from: try JSONEncoder().encode(server))
    #expect(decoded == server)
    #expect(decoded.nextDeadline == t0.advanced(by: .seconds(60)))
    #expect(decoded.deadlineReached(at: t0.advanced(by: .seconds(59))).isEmpty)
    #expect(decoded.deadlineReached(at: t0.advanced(by: .seconds(60))).count == 2)
    #expect(decoded.videos.keys.sorted() == [vid2])
    #expect(decoded.nextDeadline == t0.advanced(by: .seconds(130)))
  }

  @Test("steps are sized so progress shows within seconds on a 50 B/s link, and reach the chunk size on a fast one")
  func pacer() {
    for (bytesPerSecond, label) in [(50.0, "50 B/s"), (2_000.0, "2 KB/s"), (10_000_000.0, "10 MB/s")] {
      var pacer = TransferPacer(maximumStep: 64 << 10)
      var longest = Duration.zero
      var steps = 0
      var moved = 0
      while moved < 1 << 20 && steps < 2_000 {
        let bytes = pacer.nextStep
        let took = Duration.nanoseconds(Int64(Double(bytes) / bytesPerSecond * 1e9))
        longest = max(longest, took)
        pacer.stepCompleted(bytes: bytes, took: took)
        moved += bytes
        steps += 1
      }
      #expect(longest <= .seconds(3), "\(label): a step took \(longest)")
      if bytesPerSecond > 1_000_000 {
        #expect(pacer.nextStep == 64 << 10, "\(label): \(pacer.nextStep)")
        #expect(steps < 30, "\(label): \(steps) steps for 1 MiB")
      }
    }
  }
}
