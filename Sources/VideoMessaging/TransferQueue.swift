import EventProtocol
import UpdateMachine

/// A device's video transfers, as a pure state machine: which incoming video to download next, which
/// recording to upload, retries with backoff, what to hand to the app, and what to tell the server.
///
/// Never all-or-nothing (seed 004): each video downloads on its own, one at a time, oldest first, resumes
/// from the byte offset it reached, and is handed to the app as soon as it completes.
///
/// The rules:
/// - A download starts only for a video the state **confirmed by the server this session** lists as
///   incoming (never from a guess, and never from a state read back at launch: a phone restored from a
///   backup would fetch a video it already downloaded since, whose blob is gone).
/// - A video is downloaded at most once: once complete it stays in ``completedIDs`` for as long as the
///   server still lists it (its `downloaded` may still be in the outbox), so even a video viewed and
///   removed locally is never fetched again; the server never lists it again once `downloaded` is applied,
///   because a status never goes back. A late video older than every other one is still downloaded.
/// - A download whose video the server stops listing is cancelled and the app is told why: downloaded or
///   viewed (on another of the user's devices, or here before a restore), or withdrawn (deleted by its
///   sender, or expired). A download whose blob is gone is dropped and the app is told, never retried for
///   ever. Other failures retry from the same offset after a wait that doubles with each failure in a row
///   (1 s to 5 minutes, ``backoff``); progress resets the count.
/// - A recording uploads first (resumable), then its `uploaded` notice goes through the outbox, which keeps
///   it across restarts until the server has it.
///
/// It is `Codable`: the ``VideoDevice`` saves it as the update machine's device data, in the same atomic
/// write as the state and the outbox.
public struct TransferQueue: Codable, Sendable, Equatable {
  /// Where one incoming video's download stands.
  public enum DownloadState: Codable, Sendable, Hashable {
    /// Waiting for its turn.
    case queued
    /// Being fetched; `bytesDone` is the last progress reported.
    case downloading(bytesDone: Int)
    /// Failed `attempts` times in a row; tried again at `retryAt` from the offset reached.
    case failed(attempts: Int, retryAt: Timestamp)
  }

  /// One incoming video to download.
  public struct Download: Codable, Sendable, Hashable {
    /// The video, as the confirmed state lists it.
    public var video: IncomingVideo
    /// Where it stands.
    public var state: DownloadState
    /// How many attempts in a row failed without moving a byte: what the next wait grows from, kept while
    /// a retry is under way.
    public var failures: Int

    init(video: IncomingVideo, state: DownloadState, failures: Int = 0) {
      self.video = video
      self.state = state
      self.failures = failures
    }

    public init(from decoder: any Decoder) throws {
      let container = try decoder.container(keyedBy: CodingKeys.self)
      video = try container.decode(IncomingVideo.self, forKey: .video)
      state = try container.decode(DownloadState.self, forKey: .state)
      failures = try container.decodeIfPresent(Int.self, forKey: .failures) ?? 0
    }
  }

  /// Where one recording's upload stands.
  public enum UploadState: Codable, Sendable, Hashable {
    /// Waiting for its turn.
    case queued
    /// Being stored; `bytesDone` is the last progress reported.
    case uploading(bytesDone: Int)
    /// Failed `attempts` times in a row; tried again at `retryAt` from the offset reached.
    case failed(attempts: Int, retryAt: Timestamp)
  }

  /// One recording to upload.
  public struct Upload: Codable, Sendable, Hashable {
    /// The notice to send once the file is stored.
    public var notice: VideoUpload
    /// Where the recording is on the device.
    public var localKey: BlobKey
    /// Where it stands.
    public var state: UploadState
    /// How many attempts in a row failed without moving a byte, kept while a retry is under way.
    public var failures: Int

    init(notice: VideoUpload, localKey: BlobKey, state: UploadState, failures: Int = 0) {
      self.notice = notice
      self.localKey = localKey
      self.state = state
      self.failures = failures
    }

    public init(from decoder: any Decoder) throws {
      let container = try decoder.container(keyedBy: CodingKeys.self)
      notice = try container.decode(VideoUpload.self, forKey: .notice)
      localKey = try container.decode(BlobKey.self, forKey: .localKey)
      state = try container.decode(UploadState.self, forKey: .state)
      failures = try container.decodeIfPresent(Int.self, forKey: .failures) ?? 0
    }
  }

  /// Why a download was given up, as the app is told: "you already have it" (``downloaded``,
  /// ``viewed``) or "it was taken back" (``withdrawn``, ``blobGone``).
  public enum AbandonReason: String, Codable, Sendable, Hashable {
    /// One of the user's devices downloaded it (another one, or this one before it was restored from a
    /// backup): the server lists it as received.
    case downloaded
    /// One of the user's devices viewed it.
    case viewed
    /// The server no longer offers it: its sender deleted it, or nobody downloaded it in time (expired).
    case withdrawn
    /// The blob is gone although the server still listed the video.
    case blobGone
  }

  /// What the shell must do.
  public enum Action: Sendable, Hashable {
    /// Fetch `video`'s blob into the device's store under `localKey`, resuming from what is there.
    case download(IncomingVideo, localKey: BlobKey)
    /// Stop fetching `video`.
    case cancelDownload(VideoID)
    /// Store a recording's file in blob storage, resuming from what is there.
    case upload(VideoUpload, localKey: BlobKey)
    /// Tell the app: a video is downloaded and playable.
    case deliver(DeliveredVideo)
    /// Tell the app: a download was given up.
    case abandon(VideoID, AbandonReason)
    /// Delete a file from the device's store.
    case discardLocal(BlobKey)
    /// Send a command through the outbox.
    case submit(VideoCommand)
    /// Save the queue (in the update machine's record).
    case save
  }

  /// The downloads not yet complete, oldest video first.
  public private(set) var downloads: [Download] = []
  /// The uploads not yet stored, oldest first.
  public private(set) var uploads: [Upload] = []
  /// Videos downloaded here, remembered while the server still lists them.
  public private(set) var completedIDs: Set<VideoID> = []
  /// The videos downloaded and not removed by the app, oldest first: what the app plays.
  public private(set) var library: [DeliveredVideo] = []
  private var random: SeededRandomNumberGenerator
  /// Whether a state confirmed by the server this session arrived since the queue was created or read
  /// back: until then no download starts (never saved).
  public private(set) var hasSessionConfirmation = false
  /// While the platform reports the network lost: when a transfer may next try, in case the report was
  /// wrong (never saved: a queue read back assumes a network until told otherwise).
  public private(set) var offlineProbeAt: Timestamp?

  private enum CodingKeys: String, CodingKey {
    case downloads
    case uploads
    case completedIDs
    case library
    case random
  }

  /// How failed transfers back off (1 s doubling to 5 minutes).
  public static let backoff = BackoffPolicy(base: .seconds(1), cap: .seconds(300))
  /// While the network is reported lost, how often one transfer tries anyway (as the update machine's
  /// `offlineProbeInterval`).
  public static let offlineProbeInterval: Duration = .seconds(300)

  /// An empty queue.
  public init(seed: UInt64) {
    random = SeededRandomNumberGenerator(seed: seed)
  }

  /// Where a video downloads to on the device.
  public static func localKey(for video: VideoID) -> BlobKey { BlobKey(rawValue: "incoming/\(video.rawValue)") }

  // MARK: - Inputs

  /// The queue was read back after a restart: uploads that were under way or waiting to retry start
  /// again at once, from their offset (the app was just opened: try now); downloads wait for the first
  /// state the server confirms this session (the saved one may be older than a backup being restored).
  /// Completed downloads the server may not know about yet (a kill right after the completion was saved)
  /// announce `downloaded` again; the server treats a repeat as a no-op.
  public mutating func restarted(now: Timestamp) -> [Action] {
    hasSessionConfirmation = false
    for index in downloads.indices { downloads[index].state = .queued }
    for index in uploads.indices { uploads[index].state = .queued }
    return completedIDs.sorted().map { Action.submit(.downloaded($0)) } + proceed(now: now)
  }

  /// The confirmed state changed: queue what is new, give up what is no longer listed (saying why), forget
  /// completed videos the server stopped listing. A state not confirmed by the server this session (the one
  /// read back at launch) changes nothing.
  public mutating func confirmed(_ state: VideoSnapshot, isConfirmedThisSession: Bool, now: Timestamp) -> [Action] {
    guard isConfirmedThisSession else { return [] }
    hasSessionConfirmation = true
    let incoming = state.incoming
    let listed = Dictionary(incoming.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    let received = Dictionary(state.received.map { ($0.id, $0.status) }, uniquingKeysWith: { first, _ in first })
    var actions: [Action] = []
    var changed = false
    for download in downloads where listed[download.video.id] == nil {
      if case .downloading = download.state { actions.append(.cancelDownload(download.video.id)) }
      let reason: AbandonReason =
        switch received[download.video.id] {
        case .viewed?: .viewed
        case .downloaded?: .downloaded
        default: .withdrawn
        }
      actions += [.discardLocal(Self.localKey(for: download.video.id)), .abandon(download.video.id, reason)]
      changed = true
    }
    downloads.removeAll { listed[$0.video.id] == nil }
    let forgotten = completedIDs.filter { listed[$0] == nil }
    if !forgotten.isEmpty {
      completedIDs.subtract(forgotten)
      changed = true
    }
    for video in incoming
    where !completedIDs.contains(video.id) && !downloads.contains(where: { $0.video.id == video.id }) {
      let index = downloads.firstIndex { $0.video.id > video.id } ?? downloads.endIndex
      downloads.insert(Download(video: video, state: .queued), at: index)
      changed = true
    }
    if changed { actions.append(.save) }
    return actions + proceed(now: now)
  }

  /// A download made progress: bytes moved, so the failures in a row start again from none.
  public mutating func downloadProgressed(_ video: VideoID, bytesDone: Int) {
    guard let index = downloads.firstIndex(where: { $0.video.id == video }), case .downloading = downloads[index].state
    else { return }
    downloads[index].state = .downloading(bytesDone: bytesDone)
    downloads[index].failures = 0
  }

  /// A download completed: the video is handed to the app once, and `downloaded` goes to the server.
  public mutating func downloadFinished(_ video: VideoID, now: Timestamp) -> [Action] {
    guard let index = downloads.firstIndex(where: { $0.video.id == video }) else { return proceed(now: now) }
    let download = downloads.remove(at: index)
    completedIDs.insert(video)
    let delivered = DeliveredVideo(video: download.video, localKey: Self.localKey(for: video), viewed: false)
    library.append(delivered)
    // Saved before `downloaded` is sent: once the server applies it, it stops listing the video, and the
    // device must already know the video is in its library (a kill in between re-sends it, see restarted).
    return [.save, .submit(.downloaded(video)), .deliver(delivered)] + proceed(now: now)
  }

  /// A download failed; a gone blob gives the video up, anything else retries after the backoff.
  public mutating func downloadFailed(_ video: VideoID, _ error: BlobStoreError, now: Timestamp) -> [Action] {
    guard let index = downloads.firstIndex(where: { $0.video.id == video }) else { return proceed(now: now) }
    if error.isGone {
      downloads.remove(at: index)
      return [.discardLocal(Self.localKey(for: video)), .abandon(video, .blobGone), .save] + proceed(now: now)
    }
    let attempts = downloads[index].failures + 1
    let retryAt = now.advanced(by: Self.backoff.delay(attempt: attempts, using: &random))
    downloads[index].failures = attempts
    downloads[index].state = .failed(attempts: attempts, retryAt: retryAt)
    return [.save] + proceed(now: now)
  }

  /// The app recorded a video for `recipient`, stored on the device under `localKey`.
  public mutating func recorded(_ notice: VideoUpload, localKey: BlobKey, now: Timestamp) -> [Action] {
    uploads.append(Upload(notice: notice, localKey: localKey, state: .queued))
    return [.save] + proceed(now: now)
  }

  /// An upload made progress.
  public mutating func uploadProgressed(_ video: VideoID, bytesDone: Int) {
    guard let index = uploads.firstIndex(where: { $0.notice.video == video }), case .uploading = uploads[index].state
    else { return }
    uploads[index].state = .uploading(bytesDone: bytesDone)
    uploads[index].failures = 0
  }

  /// A recording is stored: its `uploaded` notice goes through the outbox, which keeps it until applied.
  public mutating func uploadFinished(_ video: VideoID, now: Timestamp) -> [Action] {
    guard let index = uploads.firstIndex(where: { $0.notice.video == video }) else { return proceed(now: now) }
    let upload = uploads.remove(at: index)
    return [.submit(.uploaded(upload.notice)), .save] + proceed(now: now)
  }

  /// An upload failed; it retries after the backoff from the offset reached.
  public mutating func uploadFailed(_ video: VideoID, now: Timestamp) -> [Action] {
    guard let index = uploads.firstIndex(where: { $0.notice.video == video }) else { return proceed(now: now) }
    let attempts = uploads[index].failures + 1
    uploads[index].failures = attempts
    uploads[index].state = .failed(
      attempts: attempts,
      retryAt: now.advanced(by: Self.backoff.delay(attempt: attempts, using: &random))
    )
    return [.save] + proceed(now: now)
  }

  /// The sender set `caption` on `video`: a recording still uploading carries it in its notice; one
  /// already announced changes it through the outbox (after the notice, which the outbox sent first).
  public mutating func captioned(_ video: VideoID, caption: String) -> [Action] {
    guard let index = uploads.firstIndex(where: { $0.notice.video == video }) else {
      return [.submit(.captioned(video, caption: caption))]
    }
    uploads[index].notice.caption = caption.isEmpty ? nil : caption
    return [.save]
  }

  /// The app played a video: `viewed` goes to the server once.
  public mutating func viewed(_ video: VideoID) -> [Action] {
    guard let index = library.firstIndex(where: { $0.video.id == video }), !library[index].viewed else { return [] }
    library[index].viewed = true
    return [.submit(.viewed(video)), .save]
  }

  /// The app removed a video from its library (its file is deleted); it is never downloaded again.
  public mutating func removed(_ video: VideoID) -> [Action] {
    guard let index = library.firstIndex(where: { $0.video.id == video }) else { return [] }
    let removed = library.remove(at: index)
    return [.discardLocal(removed.localKey), .save]
  }

  /// Time passed: start what is due.
  public mutating func timerFired(now: Timestamp) -> [Action] {
    proceed(now: now)
  }

  /// The platform reports the network gone: nothing starts (not a new recording's upload, not a retry)
  /// until it is reported back, but for one try every ``offlineProbeInterval`` in case the report was
  /// wrong. The transfers under way fail on their own.
  public mutating func networkLost(now: Timestamp) -> [Action] {
    offlineProbeAt = offlineProbeAt ?? now.advanced(by: Self.offlineProbeInterval)
    return []
  }

  /// The platform reports a network again: the transfers waiting to retry start at once (their attempt
  /// counts are kept, so a failure right after backs off as before).
  public mutating func networkBecameAvailable(now: Timestamp) -> [Action] {
    offlineProbeAt = nil
    for index in downloads.indices {
      if case .failed(let attempts, let retryAt) = downloads[index].state, retryAt > now {
        downloads[index].state = .failed(attempts: attempts, retryAt: now)
      }
    }
    for index in uploads.indices {
      if case .failed(let attempts, let retryAt) = uploads[index].state, retryAt > now {
        uploads[index].state = .failed(attempts: attempts, retryAt: now)
      }
    }
    return proceed(now: now)
  }

  /// The earliest time a failed transfer may start again (possibly already past: then
  /// ``timerFired(now:)`` starts it at once); `nil` while the transfer ahead of it is still under way.
  public var nextRetryAt: Timestamp? {
    var times: [Timestamp] = []
    if hasSessionConfirmation, !downloads.contains(where: { if case .downloading = $0.state { true } else { false } }) {
      times += downloads.compactMap { if case .failed(_, let retryAt) = $0.state { retryAt } else { nil } }
    }
    if !uploads.contains(where: { if case .uploading = $0.state { true } else { false } }) {
      times += uploads.compactMap { if case .failed(_, let retryAt) = $0.state { retryAt } else { nil } }
      if let probe = offlineProbeAt, uploads.contains(where: { if case .queued = $0.state { true } else { false } }) {
        times.append(probe)
      }
    }
    if let probe = offlineProbeAt, hasSessionConfirmation,
      downloads.contains(where: { if case .queued = $0.state { true } else { false } })
    {
      times.append(probe)
    }
    guard let earliest = times.min() else { return nil }
    return offlineProbeAt.map { max($0, earliest) } ?? earliest
  }

  // MARK: - Helpers

  /// Starts the oldest due download and the oldest due upload, one of each at a time; with the network
  /// reported lost, only when the probe is due (and the probe is then spent).
  private mutating func proceed(now: Timestamp) -> [Action] {
    if let probe = offlineProbeAt {
      guard probe <= now else { return [] }
      let actions = startDue(now: now)
      if !actions.isEmpty { offlineProbeAt = now.advanced(by: Self.offlineProbeInterval) }
      return actions
    }
    return startDue(now: now)
  }

  private mutating func startDue(now: Timestamp) -> [Action] {
    var actions: [Action] = []
    let downloading = downloads.contains { if case .downloading = $0.state { true } else { false } }
    if hasSessionConfirmation, !downloading,
      let index = downloads.firstIndex(where: { Self.isDue($0.state, now: now) })
    {
      downloads[index].state = .downloading(bytesDone: 0)
      actions.append(.download(downloads[index].video, localKey: Self.localKey(for: downloads[index].video.id)))
    }
    let uploading = uploads.contains { if case .uploading = $0.state { true } else { false } }
    if !uploading, let index = uploads.firstIndex(where: { Self.isUploadDue($0.state, now: now) }) {
      uploads[index].state = .uploading(bytesDone: 0)
      actions.append(.upload(uploads[index].notice, localKey: uploads[index].localKey))
    }
    return actions
  }

  private static func isDue(_ state: DownloadState, now: Timestamp) -> Bool {
    switch state {
    case .queued: true
    case .downloading: false
    case .failed(_, let retryAt): retryAt <= now
    }
  }

  private static func isUploadDue(_ state: UploadState, now: Timestamp) -> Bool {
    switch state {
    case .queued: true
    case .uploading: false
    case .failed(_, let retryAt): retryAt <= now
    }
  }
}

/// A video downloaded and playable on the device.
public struct DeliveredVideo: Codable, Sendable, Hashable {
  /// The video as the server listed it.
  public var video: IncomingVideo
  /// Where its file is in the device's store.
  public var localKey: BlobKey
  /// Whether the app has played it (and told the server).
  public var viewed: Bool
}
