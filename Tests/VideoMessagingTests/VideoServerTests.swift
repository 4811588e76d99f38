import EventProtocol
import EventServer
import Testing
import VideoMessaging

@Suite("VideoServer: the video service's rules")
struct VideoServerTests {
  let vid1 = videoID(1)
  let vid2 = videoID(2)

  @Test("uploaded tracks the video and tells the sender and the recipient; a repeat is a no-op")
  func uploaded() throws {
    var server = VideoServer()
    let deliveries = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice)
    #expect(
      deliveries == [
        Delivery(to: [alice], event: .sent(VideoSent(video: vid1, recipient: bob, sender: alice, position: 1))),
        Delivery(
          to: [bob],
          event: .incoming(
            IncomingVideoFields(
              video: vid1,
              sender: alice,
              blobKey: .forVideo(vid1),
              size: 1_000,
              position: 1,
              recipient: bob
            )
          )
        ),
      ]
    )
    #expect(
      server.snapshot(for: alice)
        == VideoSnapshot(outgoing: [OutgoingVideo(id: vid1, recipient: bob, status: .uploaded)])
    )
    #expect(server.snapshot(for: bob) == VideoSnapshot(incoming: [incoming(vid1, from: alice)]))
    let before = server
    #expect(try server.handle(.uploaded(upload(vid1, to: bob)), from: alice) == [])
    #expect(server.videos == before.videos)
    #expect(server.droppedCommands == ["repeated uploaded for \(vid1)"])
  }

  @Test("a new video to the same friend does not overwrite the unviewed one (seed 001)")
  func severalVideosToOneFriend() throws {
    var server = VideoServer()
    _ = try server.handle(.uploaded(upload(vid2, to: bob)), from: alice)
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice)
    #expect(server.snapshot(for: bob).incoming.map(\.id) == [vid1, vid2])
    #expect(server.snapshot(for: alice).outgoing(to: bob).map(\.id) == [vid1, vid2])
  }

  @Test("only the recipient marks downloaded or viewed; only the sender deletes; strangers are refused")
  func whoMayDoWhat() throws {
    var server = VideoServer()
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice)
    let before = server
    for (command, user) in [(VideoCommand.downloaded(vid1), alice), (.viewed(vid1), carol), (.deleted(vid1), bob)] {
      #expect(throws: CommandRejection.self) { _ = try server.handle(command, from: user) }
      #expect(server == before)
    }
    #expect(throws: CommandRejection.self) { _ = try server.handle(.uploaded(upload(vid1, to: carol)), from: bob) }
  }

  @Test("status moves only forward; the same command twice emits nothing the second time")
  func statusOrder() throws {
    var server = VideoServer()
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice)
    let downloaded = try server.handle(.downloaded(vid1), from: bob)
    #expect(
      downloaded == [
        Delivery(to: [alice], event: .status(VideoStatusChanged(video: vid1, status: .downloaded))),
        Delivery(to: [bob], event: .incomingGone(VideoGone(video: vid1, reason: .downloaded))),
      ]
    )
    #expect(try server.handle(.downloaded(vid1), from: bob) == [])
    #expect(
      try server.handle(.viewed(vid1), from: bob) == [
        Delivery(to: [alice, bob], event: .status(VideoStatusChanged(video: vid1, status: .viewed)))
      ]
    )
    #expect(try server.handle(.downloaded(vid1), from: bob) == [])
    #expect(server.snapshot(for: alice).outgoing.map(\.status) == [.viewed])
  }

  @Test("viewed straight from uploaded also takes the video off the recipient's list")
  func viewedBeforeDownloaded() throws {
    var server = VideoServer()
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice)
    let viewed = try server.handle(.viewed(vid1), from: bob)
    #expect(viewed.map(\.recipients) == [[alice], [bob]])
    #expect(server.snapshot(for: bob).incoming.isEmpty)
  }

  @Test("a command for a video the server does not track is logged and dropped")
  func untracked() throws {
    var server = VideoServer()
    #expect(try server.handle(.downloaded(vid1), from: bob) == [])
    #expect(try server.handle(.deleted(vid1), from: alice) == [])
    #expect(server.droppedCommands.count == 2)
  }

  @Test("deleting an undownloaded video removes it for both and releases its blob once")
  func deletion() throws {
    var server = VideoServer()
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice)
    #expect(try server.handle(.deleted(vid1), from: alice).map(\.recipients) == [[alice], [bob]])
    #expect(server.snapshot(for: alice) == VideoSnapshot())
    #expect(server.snapshot(for: bob) == VideoSnapshot())
    #expect(server.takeBlobDeletions() == [.forVideo(vid1)])
    #expect(server.takeBlobDeletions() == [])
  }

  @Test("a blob is released once its video is downloaded; unclaimed blobs are swept after the grace period")
  func blobs() throws {
    var server = VideoServer()
    _ = try server.handle(.uploaded(upload(vid1, to: bob)), from: alice)
    _ = try server.handle(.uploaded(upload(vid2, to: bob)), from: alice)
    _ = try server.handle(.downloaded(vid1), from: bob)
    #expect(server.takeBlobDeletions() == [.forVideo(vid1)])
    let stranded = BlobKey(rawValue: "videos/never-announced")
    let listing = [
      BlobInfo(key: .forVideo(vid2), size: 1, createdAt: t0),
      BlobInfo(key: stranded, size: 1, createdAt: t0),
    ]
    #expect(server.unclaimedBlobs(in: listing, now: t0.advanced(by: .seconds(60)), grace: .seconds(3600)) == [])
    #expect(
      server.unclaimedBlobs(in: listing, now: t0.advanced(by: .seconds(3600)), grace: .seconds(3600)) == [stranded]
    )
  }

  @Test("video ids sort by creation time and carry 96 random bits")
  func videoIDs() {
    #expect(videoID(1, 9) < videoID(2, 1))
    #expect(videoID(1, 1) != videoID(1, 2))
    #expect(videoID(1).rawValue.count == 13 + 1 + 24)
  }

  @Test("a token authenticates its user; an unknown token is UNAUTHORIZED")
  func accounts() throws {
    var accounts = VideoAccounts()
    accounts.add(alice, token: "secret-a")
    accounts.add(alice, token: "secret-a2")
    #expect(try accounts.authenticate("secret-a2") == alice)
    #expect(throws: EventAPIError.unauthorized()) { _ = try accounts.authenticate("secret-a") }
  }
}
