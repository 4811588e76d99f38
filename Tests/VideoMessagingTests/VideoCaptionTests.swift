import EventProtocol
import EventServer
import Foundation
import Testing
import UpdateMachine
import UpdateMachineTesting
import VideoMessaging

/// A video's caption: the domain's one editable field, set by its sender when sending and changed at any
/// time while the video is in its conversation's history.
@Suite("VideoMessaging: captions the sender can change")
struct VideoCaptionTests {
  let vid1 = videoID(1)

  @Test("the sender sets, changes and removes a caption; both users hear each change once; repeats emit nothing")
  func senderChangesCaption() throws {
    var server = VideoServer()
    var captioned = upload(vid1, to: bob)
    captioned.caption = "the beach"
    let sent = try server.handle(.uploaded(captioned), from: alice, at: t0)
    #expect(
      sent.map(\.event).contains(
        .sent(VideoSent(video: vid1, recipient: bob, sender: alice, position: 1, caption: "the beach"))
      )
    )
    #expect(server.history[vid1]?.caption == "the beach")

    let changed = try server.handle(.captioned(vid1, caption: "the beach, at dawn"), from: alice, at: t0)
    #expect(
      changed == [
        Delivery(to: [alice, bob], event: .captioned(VideoCaptionChanged(video: vid1, caption: "the beach, at dawn")))
      ]
    )
    #expect(try server.handle(.captioned(vid1, caption: "the beach, at dawn"), from: alice, at: t0).isEmpty)
    let removed = try server.handle(.captioned(vid1, caption: ""), from: alice, at: t0)
    #expect(removed.map(\.event) == [.captioned(VideoCaptionChanged(video: vid1, caption: nil))])
    #expect(server.history[vid1]?.caption == nil)
  }

  @Test("only the sender may caption; a caption over the bound is refused; a video in no history is dropped")
  func refusals() throws {
    var limits = VideoServerLimits()
    limits.maximumCaptionBytes = 10
    var server = VideoServer(limits: limits)
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice, at: t0)
    let before = server
    #expect(throws: CommandRejection.self) { try server.handle(.captioned(vid1, caption: "mine"), from: bob, at: t0) }
    #expect(throws: CommandRejection.self) {
      try server.handle(.captioned(vid1, caption: String(repeating: "é", count: 6)), from: alice, at: t0)
    }
    var long = upload(videoID(2), to: bob)
    long.caption = "eleven byte"
    #expect(throws: CommandRejection.self) { try server.handle(.uploaded(long), from: alice, at: t0) }
    #expect(server.history == before.history && server.videos == before.videos)
    _ = try server.handle(.deleted(vid1), from: alice, at: t0)
    #expect(try server.handle(.captioned(vid1, caption: "late"), from: alice, at: t0).isEmpty)
    #expect(server.droppedCommands.last?.contains("caption") == true)
  }

  @Test("a retired video's caption still changes (it is in the history); one sent to yourself is one event")
  func retiredAndSelf() throws {
    var server = VideoServer()
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice, at: t0)
    _ = try server.handle(.downloaded(vid1), from: bob, at: t0)
    _ = server.deadlineReached(at: t0.advanced(by: server.retention.afterDownloaded))
    #expect(server.videos[vid1] == nil)
    #expect(try server.handle(.captioned(vid1, caption: "kept"), from: alice, at: t0).count == 1)
    #expect(server.history[vid1]?.caption == "kept")
    let own = videoID(3)
    _ = try server.handle(.uploaded(upload(own, to: alice)), from: alice, at: t0)
    #expect(
      try server.handle(.captioned(own, caption: "note to self"), from: alice, at: t0)
        == [Delivery(to: [alice], event: .captioned(VideoCaptionChanged(video: own, caption: "note to self")))]
    )
  }

  @Test("state saved before captions decodes: no caption, the default bound")
  func olderStateDecodes() throws {
    let item = try JSONDecoder().decode(
      VideoHistoryItem.self,
      from: Data(#"{"video":"v","sender":"a","recipient":"b","status":1,"position":3}"#.utf8)
    )
    #expect(item.caption == nil && item.position == 3)
    let limits = try JSONDecoder().decode(VideoServerLimits.self, from: Data(#"{"maximumVideoIDBytes":40}"#.utf8))
    #expect(limits.maximumVideoIDBytes == 40 && limits.maximumCaptionBytes == VideoServerLimits().maximumCaptionBytes)
  }

  @Test("the device: a caption set while the recording uploads rides in its notice; later ones go through the outbox")
  func transferQueueCarriesCaption() {
    var transfers = TransferQueue(seed: 1)
    let notice = upload(vid1, to: bob)
    _ = transfers.recorded(notice, localKey: "outgoing/1", now: t0)
    #expect(transfers.captioned(vid1, caption: "first try") == [.save])
    let finished = transfers.uploadFinished(vid1, now: t0)
    var expected = notice
    expected.caption = "first try"
    #expect(finished.first == .submit(.uploaded(expected)))
    #expect(transfers.captioned(vid1, caption: "second") == [.submit(.captioned(vid1, caption: "second"))])
  }
}

/// The video domain's own reducer and server under the event-vs-fetch races of partial state: a caption
/// edited around a fetch of its conversation, by the other user or by the device itself through its outbox.
@Suite("VideoMessaging: caption edits racing fetches of a conversation")
struct VideoCaptionRaceTests {
  typealias Harness = RaceHarness<VideoServer, VideoReducer>
  static let conversation = VideoHistory.conversation(between: bob, and: alice)
  static let page = FetchRequest(narrow: conversation, anchor: .newest, before: 10, after: 0)

  /// Bob's device, registered, with two videos from alice in its history (one fetched page).
  static func bobWithTwoVideos() throws -> (Harness, VideoID, VideoID) {
    var harness = Harness(application: VideoServer(), reducer: VideoReducer(), user: bob)
    harness.answerRegister()
    var random = SeededRandomNumberGenerator(seed: 3)
    let first = VideoID.make(at: t0, using: &random)
    let second = VideoID.make(at: t0.advanced(by: .seconds(1)), using: &random)
    try harness.serverCommand(.uploaded(upload(first, to: bob)), from: alice)
    try harness.serverCommand(.uploaded(upload(second, to: bob)), from: alice)
    harness.answerPoll()
    try harness.answerFetch(harness.fetch(page))
    return (harness, first, second)
  }

  static func caption(_ harness: Harness, _ video: VideoID) -> String? {
    harness.core.confirmedState!.history.item(video).item?.caption
  }

  @Test(
    "an edit read into a page and polled later, or polled before a page read earlier, counts once and is never lost"
  )
  func editAroundFetch() throws {
    var (harness, first, _) = try Self.bobWithTwoVideos()
    // The page is read, then the edit lands; its event is applied before the (older) page arrives.
    let early = harness.fetch(Self.page)
    let stalePage = try harness.readPage(early)
    try harness.serverCommand(.captioned(first, caption: "after the read"), from: alice)
    harness.answerPoll()
    harness.deliver(early, stalePage)
    #expect(harness.outcomes[early] == .merged)
    #expect(Self.caption(harness, first) == "after the read", "the older page must not undo the edit")

    // The edit lands before the read; the page arrives before the client polls the edit's event.
    let late = harness.fetch(Self.page)
    try harness.serverCommand(.captioned(first, caption: "before the read"), from: alice)
    try harness.answerFetch(late)
    #expect(harness.outcomes[late] == nil, "the page is ahead of the finger: held")
    #expect(Self.caption(harness, first) == "after the read")
    harness.answerPoll()
    #expect(harness.outcomes[late] == .merged)
    #expect(Self.caption(harness, first) == "before the read")
  }

  @Test("a caption removed, then the video deleted, racing a page that still lists it: gone once, never back")
  func deletedAroundFetch() throws {
    var (harness, first, second) = try Self.bobWithTwoVideos()
    let id = harness.fetch(Self.page)
    let page = try harness.readPage(id)
    try harness.serverCommand(.captioned(first, caption: ""), from: alice)
    try harness.serverCommand(.deleted(first), from: alice)
    harness.answerPoll()
    harness.deliver(id, page)
    #expect(harness.core.confirmedState!.history.item(first) == .unknown)
    #expect(harness.core.confirmedState!.history.list(Self.conversation).items.map(\.video) == [second])
  }

  @Test("the sender's own edit shows at once, survives a page read before it, and settles on the server's")
  func ownEditPending() throws {
    var harness = Harness(application: VideoServer(), reducer: VideoReducer(), user: alice)
    harness.answerRegister()
    let video = videoID(5)
    try harness.serverCommand(.uploaded(upload(video, to: bob)), from: alice)
    harness.answerPoll()
    let conversation = VideoHistory.conversation(between: alice, and: bob)
    let request = FetchRequest(narrow: conversation, anchor: .newest, before: 10, after: 0)
    try harness.answerFetch(harness.fetch(request))

    let id = harness.fetch(request)
    let page = try harness.readPage(id)
    harness.submit(.captioned(video, caption: "mine"))
    #expect(harness.core.displayedState!.history.item(video).item?.caption == "mine", "shown at once")
    harness.deliverSubmitLosingAnswer()
    harness.deliver(id, page)
    #expect(harness.core.displayedState!.history.item(video).item?.caption == "mine", "the older page does not hide it")
    harness.answerPoll()
    #expect(harness.core.confirmedState!.history.item(video).item?.caption == "mine")
    #expect(harness.core.pendingMutations.isEmpty)
  }

  @Test("an edit made while the queue was lost is in the refetched page; the stale copy shows until then")
  func editAcrossReregistration() throws {
    var (harness, first, _) = try Self.bobWithTwoVideos()
    harness.failPoll(.api(.badEventQueueID("gone")))
    try harness.serverCommand(.captioned(first, caption: "while away"), from: alice)
    harness.answerRegister()
    #expect(
      harness.core.confirmedState!.history.item(first)
        == .stale(
          VideoHistoryItem(video: first, sender: alice, recipient: bob, status: .uploaded, position: 1)
        )
    )
    try harness.answerFetches()
    try harness.answerFetch(harness.fetch(Self.page))
    #expect(Self.caption(harness, first) == "while away")
  }
}
