import EventProtocol
import Foundation
import Testing
import UpdateMachine
import VideoMessaging

@Suite("VideoReducer: a device's copy of its user's videos")
struct VideoReducerTests {
  let reducer = VideoReducer()
  let vid1 = videoID(1)
  let vid2 = videoID(2)
  let vid3 = videoID(3)
  let vid4 = videoID(4)
  let vid5 = videoID(5)

  @Test("a status for a video the client does not track never touches another (seed 000: vid1 after vid2)")
  func statusForUntrackedVideoIgnored() throws {
    var state = VideoSnapshot(outgoing: [OutgoingVideo(id: vid2, recipient: bob, status: .uploaded)])
    let expected = state
    try reducer.apply(.status(VideoStatusChanged(video: vid1, status: .viewed)), to: &state)
    #expect(state == expected)
  }

  @Test("a status never goes back")
  func statusNeverGoesBack() throws {
    var state = VideoSnapshot(outgoing: [OutgoingVideo(id: vid1, recipient: bob, status: .viewed)])
    let expected = state
    try reducer.apply(.status(VideoStatusChanged(video: vid1, status: .downloaded)), to: &state)
    #expect(state == expected)
  }

  @Test("an incoming video already listed is ignored; a late, older one is inserted in order, not lost")
  func incomingOrderAndDuplicates() throws {
    var state = VideoSnapshot(incoming: [incoming(vid2, from: alice)])
    try reducer.apply(
      .incoming(IncomingVideoFields(video: vid2, sender: alice, blobKey: .forVideo(vid2), size: 1_000)),
      to: &state
    )
    #expect(state == VideoSnapshot(incoming: [incoming(vid2, from: alice)]))
    try reducer.apply(
      .incoming(IncomingVideoFields(video: vid1, sender: alice, blobKey: .forVideo(vid1), size: 1_000)),
      to: &state
    )
    #expect(state == VideoSnapshot(incoming: [incoming(vid1, from: alice), incoming(vid2, from: alice)]))
  }

  @Test("a recording shows as sending until the server confirms it, then as uploaded")
  func sendingThenUploaded() throws {
    var confirmed = VideoSnapshot()
    var shown = confirmed
    reducer.applyOptimistically(.uploaded(upload(vid1, to: bob)), to: &shown)
    #expect(shown == VideoSnapshot(outgoing: [OutgoingVideo(id: vid1, recipient: bob, status: .sending)]))
    try reducer.apply(.sent(VideoSent(video: vid1, recipient: bob)), to: &confirmed)
    shown = confirmed
    reducer.applyOptimistically(.uploaded(upload(vid1, to: bob)), to: &shown)
    #expect(shown == VideoSnapshot(outgoing: [OutgoingVideo(id: vid1, recipient: bob, status: .uploaded)]))
  }

  @Test("pending downloaded, viewed and deleted commands show at once")
  func optimisticRemovals() {
    var state = VideoSnapshot(
      outgoing: [OutgoingVideo(id: vid2, recipient: bob, status: .viewed)],
      incoming: [incoming(vid1, from: alice)]
    )
    reducer.applyOptimistically(.downloaded(vid1), to: &state)
    reducer.applyOptimistically(.deleted(vid2), to: &state)
    #expect(state == VideoSnapshot(received: [ReceivedVideo(id: vid1, sender: alice, status: .downloaded)]))
  }

  @Test("untracked and gone events remove exactly their video; a download or view moves it to received")
  func removals() throws {
    var state = VideoSnapshot(
      outgoing: [
        OutgoingVideo(id: vid1, recipient: bob, status: .viewed),
        OutgoingVideo(id: vid2, recipient: bob, status: .uploaded),
      ],
      incoming: [incoming(vid3, from: carol), incoming(vid4, from: carol), incoming(vid5, from: carol)]
    )
    try reducer.apply(.untracked(VideoGone(video: vid1, reason: .deleted)), to: &state)
    try reducer.apply(.incomingGone(VideoGone(video: vid3, reason: .expired)), to: &state)
    try reducer.apply(.incomingGone(VideoGone(video: vid4, reason: .downloaded)), to: &state)
    try reducer.apply(.incomingGone(VideoGone(video: vid5, reason: .viewed)), to: &state)
    #expect(
      state
        == VideoSnapshot(
          outgoing: [OutgoingVideo(id: vid2, recipient: bob, status: .uploaded)],
          incoming: [],
          received: [
            ReceivedVideo(id: vid4, sender: carol, status: .downloaded),
            ReceivedVideo(id: vid5, sender: carol, status: .viewed),
          ]
        )
    )
    // Viewed on the recipient's other device; then the server forgets it.
    try reducer.apply(.status(VideoStatusChanged(video: vid4, status: .viewed)), to: &state)
    #expect(state.received.map(\.status) == [.viewed, .viewed])
    try reducer.apply(.untracked(VideoGone(video: vid4, reason: .retired)), to: &state)
    #expect(state.received.map(\.id) == [vid5])
  }

  @Test("every event has its own wire type and flat fields")
  func wireShape() throws {
    let reply = EventsReply<VideoEvent>(
      events: [
        EventEnvelope(
          id: 0,
          body: .payload(.incoming(IncomingVideoFields(video: "v", sender: alice, blobKey: "b", size: 3)))
        )
      ],
      queueID: nil
    )
    let text = String(decoding: try WireFormat.encode(reply), as: UTF8.self)
    #expect(text.contains(#"{"blob_key":"b","id":0,"sender":"alice","size":3,"type":"video_incoming","video":"v"}"#))
    #expect(try WireFormat.decode(EventsReply<VideoEvent>.self, from: Data(text.utf8)) == reply)
  }
}
