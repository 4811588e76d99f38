import EventProtocol
import Foundation
import Testing
import UpdateMachine

@testable import VideoMessaging

@Suite("TransferQueue: per-video downloads and uploads")
struct TransferQueueTests {
  let vid1 = videoID(1)
  let vid2 = videoID(2)
  let vid3 = videoID(3)

  func local(_ video: VideoID) -> BlobKey { TransferQueue.localKey(for: video) }

  @Test("confirmed incoming videos are queued in id order and downloaded one at a time, oldest first")
  func queuedOldestFirst() {
    var queue = TransferQueue(seed: 1)
    let actions = queue.incomingConfirmed([incoming(vid2, from: alice), incoming(vid1, from: alice)], now: t0)
    #expect(actions == [.save, .download(incoming(vid1, from: alice), localKey: local(vid1))])
    #expect(queue.downloads.map(\.video.id) == [vid1, vid2])
    #expect(queue.downloads.map(\.state) == [.downloading(bytesDone: 0), .queued])
  }

  @Test("a finished download is handed over once, announced through the outbox, and the next one starts")
  func finished() {
    var queue = TransferQueue(seed: 1)
    _ = queue.incomingConfirmed([incoming(vid1, from: alice), incoming(vid2, from: alice)], now: t0)
    let actions = queue.downloadFinished(vid1, now: t0)
    let delivered = DeliveredVideo(video: incoming(vid1, from: alice), localKey: local(vid1), viewed: false)
    #expect(
      actions == [
        .save, .submit(.downloaded(vid1)), .deliver(delivered),
        .download(incoming(vid2, from: alice), localKey: local(vid2)),
      ]
    )
    #expect(queue.library == [delivered])
    #expect(queue.completedIDs == [vid1])
  }

  @Test("a notice for a video already downloaded starts no second download, even after it was viewed and removed")
  func neverTwice() {
    var queue = TransferQueue(seed: 1)
    _ = queue.incomingConfirmed([incoming(vid1, from: alice)], now: t0)
    _ = queue.downloadFinished(vid1, now: t0)
    _ = queue.viewed(vid1)
    _ = queue.removed(vid1)
    // `downloaded` is still in the outbox, so a re-register's snapshot still lists the video.
    #expect(queue.incomingConfirmed([incoming(vid1, from: alice)], now: t0) == [])
    #expect(queue.downloads.isEmpty)
    // Once the server stops listing it, the device forgets it: the server never lists it again.
    #expect(queue.incomingConfirmed([], now: t0) == [.save])
    #expect(queue.completedIDs.isEmpty)
  }

  @Test("a late video older than every other one is still downloaded")
  func lateOlderVideoNotLost() {
    var queue = TransferQueue(seed: 1)
    _ = queue.incomingConfirmed([incoming(vid3, from: alice)], now: t0)
    _ = queue.downloadFinished(vid3, now: t0)
    let actions = queue.incomingConfirmed([incoming(vid1, from: alice), incoming(vid3, from: alice)], now: t0)
    #expect(actions.contains(.download(incoming(vid1, from: alice), localKey: local(vid1))))
  }

  @Test("an incoming video deleted by its sender mid-download is cancelled, its partial file removed, the app told")
  func deletedMidDownload() {
    var queue = TransferQueue(seed: 1)
    _ = queue.incomingConfirmed([incoming(vid1, from: alice)], now: t0)
    queue.downloadProgressed(vid1, bytesDone: 400)
    let actions = queue.incomingConfirmed([], now: t0)
    #expect(actions == [.cancelDownload(vid1), .discardLocal(local(vid1)), .abandon(vid1, .withdrawn), .save])
    #expect(queue.downloads.isEmpty)
  }

  @Test("a gone blob is dropped and the app told, never retried; other failures retry from the offset")
  func failures() throws {
    var queue = TransferQueue(seed: 1)
    _ = queue.incomingConfirmed([incoming(vid1, from: alice), incoming(vid2, from: alice)], now: t0)
    let transient = queue.downloadFailed(vid1, .unavailable("timeout"), now: t0)
    #expect(transient.first == .save)
    guard case .failed(attempts: 1, let retryAt) = queue.downloads.first?.state else {
      Issue.record("state \(String(describing: queue.downloads.first?.state))")
      return
    }
    #expect(retryAt > t0 && retryAt <= t0.advanced(by: .seconds(1)))
    #expect(transient.last == .download(incoming(vid2, from: alice), localKey: local(vid2)))
    #expect(queue.nextRetryAt == nil)  // one download at a time: vid1 waits for vid2
    let gone = queue.downloadFailed(vid2, .gone(.forVideo(vid2)), now: t0)
    #expect(gone == [.discardLocal(local(vid2)), .abandon(vid2, .blobGone), .save])
    #expect(queue.nextRetryAt == retryAt)
    #expect(queue.timerFired(now: retryAt) == [.download(incoming(vid1, from: alice), localKey: local(vid1))])
  }

  @Test("a completed download is announced again after a restart, in case the kill came before it was sent")
  func completedAnnouncedAgain() {
    var queue = TransferQueue(seed: 1)
    _ = queue.incomingConfirmed([incoming(vid1, from: alice)], now: t0)
    _ = queue.downloadFinished(vid1, now: t0)
    #expect(queue.restarted(now: t0) == [.submit(.downloaded(vid1))])
  }

  @Test("after a restart uploads start at once; downloads wait for a state the server confirms this session")
  func restart() throws {
    var queue = TransferQueue(seed: 1)
    _ = queue.incomingConfirmed([incoming(vid1, from: alice)], now: t0)
    _ = queue.recorded(upload(vid2, to: bob), localKey: "outgoing/2", now: t0)
    let data = try JSONEncoder().encode(queue)
    var restarted = try JSONDecoder().decode(TransferQueue.self, from: data)
    #expect(restarted.downloads == queue.downloads && restarted.uploads == queue.uploads)
    #expect(restarted.restarted(now: t0) == [.upload(upload(vid2, to: bob), localKey: "outgoing/2")])
    // The state read back at launch moves nothing.
    #expect(
      restarted.confirmed(
        VideoSnapshot(incoming: [incoming(vid1, from: alice)]),
        isConfirmedThisSession: false,
        now: t0
      )
        == []
    )
    #expect(restarted.nextRetryAt == nil)
    #expect(
      restarted.incomingConfirmed([incoming(vid1, from: alice)], now: t0) == [
        .download(incoming(vid1, from: alice), localKey: local(vid1))
      ]
    )
  }

  @Test("a phone restored from a backup is told the video was downloaded, never that it is gone")
  func restoredFromBackup() throws {
    // The backup: vid1 queued for download, not yet fetched.
    var phone = TransferQueue(seed: 1)
    _ = phone.incomingConfirmed([incoming(vid1, from: alice)], now: t0)
    let backup = try JSONEncoder().encode(phone)
    // Restored after the video was downloaded (here, before the backup was restored, or on the tablet).
    var restored = try JSONDecoder().decode(TransferQueue.self, from: backup)
    let launch = restored.restarted(now: t0)
    #expect(!launch.contains { if case .download = $0 { true } else { false } })
    let synced = restored.incomingConfirmed(
      [],
      received: [ReceivedVideo(id: vid1, sender: alice, status: .downloaded)],
      now: t0
    )
    #expect(synced == [.discardLocal(local(vid1)), .abandon(vid1, .downloaded), .save])
    // Viewed elsewhere, and withdrawn (deleted or expired), say so too.
    var other = TransferQueue(seed: 2)
    _ = other.incomingConfirmed([incoming(vid1, from: alice), incoming(vid2, from: alice)], now: t0)
    let gone = other.incomingConfirmed(
      [],
      received: [ReceivedVideo(id: vid1, sender: alice, status: .viewed)],
      now: t0
    )
    #expect(gone.contains(.abandon(vid1, .viewed)))
    #expect(gone.contains(.abandon(vid2, .withdrawn)))
  }

  @Test("retry waits grow across retries: 30 minutes of an unreachable blob server cost a handful of requests")
  func backoffGrowsOverAnOutage() {
    for (isDownload, seed) in [(true, UInt64(1)), (false, 2), (true, 3), (false, 4)] {
      var queue = TransferQueue(seed: seed)
      var actions =
        isDownload
        ? queue.incomingConfirmed([incoming(vid1, from: alice)], now: t0)
        : queue.recorded(upload(vid1, to: bob), localKey: "outgoing/1", now: t0)
      var now = t0
      var requests = 0
      var waits: [Duration] = []
      let end = t0.advanced(by: .seconds(30 * 60))
      while now < end {
        let started = actions.contains {
          switch $0 {
          case .download, .upload: true
          default: false
          }
        }
        if started {
          requests += 1
          actions =
            isDownload
            ? queue.downloadFailed(vid1, .unavailable("unreachable"), now: now)
            : queue.uploadFailed(vid1, now: now)
          continue
        }
        guard let retryAt = queue.nextRetryAt else { break }
        waits.append(now.duration(to: retryAt))
        now = retryAt
        actions = queue.timerFired(now: now)
      }
      // 1 s doubling to 5 minutes, jittered: about 9 failures to reach the cap, then one per 5 minutes at most.
      #expect((8...30).contains(requests), "\(isDownload ? "download" : "upload"): \(requests) requests")
      let attempts = queue.downloads.first.map(\.failures) ?? queue.uploads.first?.failures ?? 0
      #expect(attempts == requests)
      #expect(waits.allSatisfy { $0 <= TransferQueue.backoff.cap })
    }
  }

  @Test("a retry's progress resets the count: the next failure waits as the first")
  func progressResetsBackoff() {
    var queue = TransferQueue(seed: 1)
    _ = queue.incomingConfirmed([incoming(vid1, from: alice)], now: t0)
    for _ in 0..<5 {
      _ = queue.downloadFailed(vid1, .unavailable("down"), now: t0)
      _ = queue.timerFired(now: t0.advanced(by: .seconds(400)))
    }
    #expect(queue.downloads.first?.failures == 5)
    queue.downloadProgressed(vid1, bytesDone: 100)
    _ = queue.downloadFailed(vid1, .unavailable("down"), now: t0)
    #expect(queue.downloads.first?.failures == 1)
    guard case .failed(1, let retryAt)? = queue.downloads.first?.state else {
      Issue.record("not waiting")
      return
    }
    #expect(t0.duration(to: retryAt) <= .seconds(1))
  }

  @Test("a recording uploads first, then its notice goes through the outbox; viewing is announced once")
  func uploadsAndViewing() {
    var queue = TransferQueue(seed: 1)
    #expect(
      queue.recorded(upload(vid1, to: bob), localKey: "outgoing/1", now: t0) == [
        .save, .upload(upload(vid1, to: bob), localKey: "outgoing/1"),
      ]
    )
    #expect(queue.uploadFinished(vid1, now: t0) == [.submit(.uploaded(upload(vid1, to: bob))), .save])
    #expect(queue.uploads.isEmpty)
    _ = queue.incomingConfirmed([incoming(vid2, from: alice)], now: t0)
    _ = queue.downloadFinished(vid2, now: t0)
    #expect(queue.viewed(vid2) == [.submit(.viewed(vid2)), .save])
    #expect(queue.viewed(vid2) == [])
  }

  /// Drives `queue` for an hour in which every transfer fails; returns the attempts it started.
  private func attemptsOverAnHour(
    _ queue: inout TransferQueue,
    isDownload: Bool,
    from actions: [TransferQueue.Action]
  ) -> Int {
    var actions = actions
    var now = t0
    var attempts = 0
    let end = t0.advanced(by: .seconds(3600))
    while now < end {
      if actions.contains(where: { if case .download = $0 { true } else if case .upload = $0 { true } else { false } })
      {
        attempts += 1
        actions =
          isDownload
          ? queue.downloadFailed(vid1, .unavailable("offline"), now: now) : queue.uploadFailed(vid1, now: now)
        continue
      }
      guard let retryAt = queue.nextRetryAt, retryAt < end else { break }
      now = max(now, retryAt)
      actions = queue.timerFired(now: now)
    }
    return attempts
  }

  @Test("an hour with the network reported lost: one try per 5 minutes, nothing at once for a new recording")
  func offlineHourIsQuiet() {
    for isDownload in [true, false] {
      var told = TransferQueue(seed: 5)
      _ = told.networkLost(now: t0)
      let first =
        isDownload
        ? told.incomingConfirmed([incoming(vid1, from: alice)], now: t0)
        : told.recorded(upload(vid1, to: bob), localKey: "outgoing/1", now: t0)
      // Nothing starts into a network reported lost.
      #expect(!first.contains { if case .download = $0 { true } else if case .upload = $0 { true } else { false } })
      let quiet = attemptsOverAnHour(&told, isDownload: isDownload, from: first)
      #expect((11...12).contains(quiet), "told: \(quiet) attempts")

      var untold = TransferQueue(seed: 5)
      let start =
        isDownload
        ? untold.incomingConfirmed([incoming(vid1, from: alice)], now: t0)
        : untold.recorded(upload(vid1, to: bob), localKey: "outgoing/1", now: t0)
      let busy = attemptsOverAnHour(&untold, isDownload: isDownload, from: start)
      #expect(busy > quiet + 4, "untold: \(busy) attempts, told: \(quiet)")
    }
  }

  @Test("the network back: a transfer waiting to retry starts at once, its attempt count kept")
  func networkBackRetriesAtOnce() {
    var queue = TransferQueue(seed: 6)
    _ = queue.recorded(upload(vid1, to: bob), localKey: "outgoing/1", now: t0)
    for _ in 0..<6 { _ = queue.uploadFailed(vid1, now: t0) }
    _ = queue.networkLost(now: t0)
    let later = t0.advanced(by: .seconds(20))
    #expect(queue.timerFired(now: later).isEmpty)
    let actions = queue.networkBecameAvailable(now: later)
    #expect(actions.contains { if case .upload = $0 { true } else { false } })
    #expect(queue.uploads.first?.failures == 6)
    #expect(queue.offlineProbeAt == nil)
  }
}

extension TransferQueue {
  /// The server confirmed this session a state listing `incoming` (and `received`).
  mutating func incomingConfirmed(
    _ incoming: [IncomingVideo],
    received: [ReceivedVideo] = [],
    now: Timestamp
  ) -> [Action] {
    confirmed(VideoSnapshot(incoming: incoming, received: received), isConfirmedThisSession: true, now: now)
  }
}
