import EventProtocol
import EventServer

/// The video service's server application: it tracks each video from upload to view, tells the sender and
/// the recipient through their queues, and says which blobs to delete.
///
/// Rules (from the seeds; `docs/video-messaging.md` explains each, `docs/security.md` the bounds):
/// - `uploaded` comes from the sender once the file is in blob storage; a repeat is a no-op; an id already
///   used by another video is refused, and so is a blob key bound to another user, already claimed by another
///   video, or released (keys are not capabilities: ``BlobBinding``).
/// - `downloaded` and `viewed` come from the recipient; `deleted` and `captioned` from the sender. Anyone
///   else is refused. A caption can change for as long as the video is in its conversation's history.
/// - A status never goes back: the farthest along wins, and a command that would not move it emits nothing.
/// - Each change reaches each of the two users once, on every one of their devices: the recipient hears
///   why a video stopped waiting (``VideoGoneReason``) and that a downloaded video was viewed; a video sent
///   to yourself gets one event per change.
/// - A command about a video the server does not track (deleted, or never uploaded) is logged and dropped.
/// - A blob is released once its video is downloaded (or viewed), deleted or expired: from then on nobody
///   may read it, and it is deleted; blobs no `uploaded` ever claimed are swept after a grace period
///   (``unclaimedBlobs(in:now:grace:)``).
/// - Videos are not kept for ever (``VideoRetention``): one nobody downloads expires, one downloaded or viewed
///   is forgotten after a while, so the server's memory follows the live work, not the history.
/// - Every id and string is bounded, and so is what one user may keep (``VideoServerLimits``); over a bound
///   the command is refused and nothing changes.
///
/// ```swift
/// let server = EventServer(application: VideoServer())
/// ```
public struct VideoServer: ServerApplication, Equatable, Codable {
  /// A video the server tracks.
  public struct TrackedVideo: Codable, Sendable, Hashable {
    /// The video.
    public var id: VideoID
    /// Who sent it.
    public var sender: UserID
    /// Who it is for.
    public var recipient: UserID
    /// Where its file is.
    public var blobKey: BlobKey
    /// Its size in bytes.
    public var size: Int
    /// How far it got.
    public var status: VideoStatus
    /// Whether the blob was already handed out for deletion.
    public var blobReleased: Bool
    /// When it reached its status (what ``VideoRetention`` counts from); `nil` for a video tracked before
    /// retention existed, kept until it next changes.
    public var changedAt: Timestamp?
  }

  /// What one user holds, counted as it changes so every bound is checked in O(1).
  struct Footprint: Sendable, Hashable {
    var tracked = 0
    var inFlight = 0
    var uploading: Set<BlobKey> = []
    /// The bytes of the user's blobs not released: completed uploads, and claimed videos' sizes.
    var bytes = 0
    /// Released keys, oldest release first.
    var released: [BlobKey] = []
    /// The tracked videos the user sent or receives: what their snapshot lists.
    var videos: Set<VideoID> = []
  }

  /// The tracked videos.
  public internal(set) var videos: [VideoID: TrackedVideo] = [:]
  /// Blobs to delete, oldest first, until ``takeBlobDeletions()`` hands them to the shell.
  public internal(set) var pendingBlobDeletions: [BlobKey] = []
  /// The latest commands dropped because their video is not tracked (at most 100), for logs.
  public internal(set) var droppedCommands: [String] = []
  /// Every blob key the server has bound: to its uploader, to the video that claimed it, and whether it was
  /// released.
  public internal(set) var blobBindings: [BlobKey: BlobBinding] = [:]
  /// The bounds on what each user may keep.
  public let limits: VideoServerLimits
  /// How long videos are kept.
  public let retention: VideoRetention
  /// The latest server time a command or deadline carried (what the timeless entry point uses).
  var clock = Timestamp(sinceEpoch: .zero)
  /// Derived from the videos and bindings; rebuilt when decoded.
  var footprints: [UserID: Footprint] = [:]
  /// When each video's retention runs out, derived; entries of videos that changed since are skipped.
  var retirements = DeadlineHeap<VideoID>()
  /// Every video's history entry, kept after the live lists let it go (until deleted, expired or trimmed).
  public internal(set) var history: [VideoID: VideoHistoryItem] = [:]
  /// Each conversation's videos in the order they were sent.
  var conversations: [Conversation: [VideoID]] = [:]
  var nextHistoryPosition = 1

  /// An empty service with these bounds and this retention.
  public init(limits: VideoServerLimits = VideoServerLimits(), retention: VideoRetention = VideoRetention()) {
    self.limits = limits
    self.retention = retention
  }

  public typealias FetchedItem = VideoHistoryItem

  public func snapshot(for user: UserID) -> VideoSnapshot {
    Self.snapshot(for: user, of: (footprints[user]?.videos ?? []).sorted().compactMap { videos[$0] })
  }

  /// What `user` sees of `mine`, the videos they sent or receive, sorted by id: shared by ``VideoServer``
  /// and ``StoredVideoServer``.
  static func snapshot(for user: UserID, of mine: [TrackedVideo]) -> VideoSnapshot {
    VideoSnapshot(
      outgoing: mine.filter { $0.sender == user }.map {
        OutgoingVideo(id: $0.id, recipient: $0.recipient, status: $0.status)
      },
      incoming: mine.filter { $0.recipient == user && $0.status == .uploaded }
        .map { IncomingVideo(id: $0.id, sender: $0.sender, blobKey: $0.blobKey, size: $0.size) },
      received: mine.filter { $0.recipient == user && $0.status >= .downloaded }
        .map { ReceivedVideo(id: $0.id, sender: $0.sender, status: $0.status) }
    )
  }

  public mutating func handle(
    _ command: VideoCommand,
    from user: UserID
  ) throws(CommandRejection) -> [Delivery<VideoEvent>] {
    try handle(command, from: user, at: clock)
  }

  public mutating func handle(
    _ command: VideoCommand,
    from user: UserID,
    at now: Timestamp
  ) throws(CommandRejection) -> [Delivery<VideoEvent>] {
    switch command {
    case .downloaded(let video), .viewed(let video), .deleted(let video), .captioned(let video, _):
      try Self.check(video.rawValue, "a video id", limits.maximumVideoIDBytes)
    case .uploaded, .uploadStarted, .uploadCompleted, .uploadAbandoned:
      break
    }
    clock = max(clock, now)
    switch command {
    case .uploaded(let upload): return try uploaded(upload, from: user, now: clock)
    case .downloaded(let video): return try advance(video, to: .downloaded, by: user, now: clock)
    case .viewed(let video): return try advance(video, to: .viewed, by: user, now: clock)
    case .deleted(let video): return try delete(video, by: user, now: clock)
    case .captioned(let video, let caption): return try recaption(video, to: caption, by: user)
    case .uploadStarted(let key):
      try bind(key, to: user)
      return []
    case .uploadCompleted(let key, let size):
      try completed(key, size: size, by: user)
      return []
    case .uploadAbandoned(let key):
      try abandoned(key, by: user, now: clock)
      return []
    }
  }

  static func check(_ text: String, _ what: String, _ maximum: Int) throws(CommandRejection) {
    guard (1...maximum).contains(text.utf8.count) else {
      throw CommandRejection("\(what) must be 1 to \(maximum) bytes")
    }
  }

  private mutating func uploaded(
    _ upload: VideoUpload,
    from user: UserID,
    now: Timestamp
  ) throws(CommandRejection) -> [Delivery<VideoEvent>] {
    try Self.check(upload.video.rawValue, "a video id", limits.maximumVideoIDBytes)
    try Self.check(upload.recipient.rawValue, "a recipient", limits.maximumUserIDBytes)
    try Self.check(upload.blobKey.rawValue, "a blob key", limits.maximumBlobKeyBytes)
    let caption = try Self.captionText(upload.caption, limits: limits)
    // An id still tracked or still in its conversation's history is taken: a repeat from its sender changes
    // nothing, and nobody else may reuse it.
    if let known = videos[upload.video]?.sender ?? history[upload.video]?.sender {
      guard known == user else { throw CommandRejection("video \(upload.video) belongs to another sender") }
      drop("repeated uploaded for \(upload.video)")
      return []
    }
    guard (0...limits.maximumVideoBytes).contains(upload.size) else {
      throw CommandRejection("a video is 0 to \(limits.maximumVideoBytes) bytes")
    }
    let footprint = footprints[user, default: Footprint()]
    guard footprint.tracked < limits.maximumVideosPerSender else {
      throw CommandRejection("you have \(limits.maximumVideosPerSender) videos: delete some first")
    }
    guard footprint.inFlight < limits.maximumVideosInFlightPerSender else {
      throw CommandRejection(
        "you have \(limits.maximumVideosInFlightPerSender) videos waiting for their recipients: try again later"
      )
    }
    try claim(upload, by: user)
    footprints[user]!.tracked += 1
    footprints[user]!.inFlight += 1
    track(TrackedVideo(uploaded: upload, from: user, at: now))
    let position = recordHistory(of: upload, from: user, caption: caption)
    return Self.uploadDeliveries(upload, from: user, position: position, caption: caption)
      + trimHistory(of: Conversation(user, upload.recipient))
  }

  private mutating func advance(
    _ id: VideoID,
    to status: VideoStatus,
    by user: UserID,
    now: Timestamp
  ) throws(CommandRejection) -> [Delivery<VideoEvent>] {
    guard var video = videos[id] else {
      drop("\(status) for untracked video \(id)")
      return []
    }
    guard video.recipient == user else { throw CommandRejection("only the recipient of \(id) may mark it \(status)") }
    guard status > video.status else { return [] }
    let wasWaiting = video.status == .uploaded
    video.status = status
    video.changedAt = now
    let deliveries = Self.advanceDeliveries(video, wasWaiting: wasWaiting)
    if wasWaiting {
      footprints[video.sender]!.inFlight -= 1
      releaseBlob(of: &video, now: now)
    }
    videos[id] = video
    history[id]?.status = status
    scheduleRetirement(of: video)
    return deliveries
  }

  private mutating func delete(
    _ id: VideoID,
    by user: UserID,
    now: Timestamp
  ) throws(CommandRejection) -> [Delivery<VideoEvent>] {
    guard let video = videos[id] else {
      drop("deleted for untracked video \(id)")
      return []
    }
    guard video.sender == user else { throw CommandRejection("only the sender of \(id) may delete it") }
    return forget(video, reason: .deleted, now: now)
  }

  /// Stops tracking `video` and tells both users why: the sender `video_untracked`; the recipient
  /// `video_incoming_gone` while it waited for them, else `video_untracked` (one event when they are the
  /// same user).
  mutating func forget(_ tracked: TrackedVideo, reason: VideoGoneReason, now: Timestamp) -> [Delivery<VideoEvent>] {
    var video = tracked
    let deliveries = Self.forgetDeliveries(video, reason: reason)
    if video.status == .uploaded { footprints[video.sender]!.inFlight -= 1 }
    releaseBlob(of: &video, now: now)
    footprints[video.sender]!.tracked -= 1
    footprints[video.sender]?.videos.remove(video.id)
    footprints[video.recipient]?.videos.remove(video.id)
    videos[video.id] = nil
    if reason != .retired { forgetHistory(of: video.id) }
    return deliveries
  }

  /// Starts tracking a video: listed for both users, with its retention deadline.
  private mutating func track(_ video: TrackedVideo) {
    videos[video.id] = video
    footprints[video.sender, default: Footprint()].videos.insert(video.id)
    footprints[video.recipient, default: Footprint()].videos.insert(video.id)
    scheduleRetirement(of: video)
  }

  mutating func drop(_ reason: String) {
    droppedCommands.append(reason)
    if droppedCommands.count > 100 { droppedCommands.removeFirst() }
  }
}

extension VideoServer.TrackedVideo {
  /// The video `upload` from `sender` announces, as tracked from `now`: status uploaded, blob not released.
  init(uploaded upload: VideoUpload, from sender: UserID, at now: Timestamp) {
    self.init(
      id: upload.video,
      sender: sender,
      recipient: upload.recipient,
      blobKey: upload.blobKey,
      size: upload.size,
      status: .uploaded,
      blobReleased: false,
      changedAt: now
    )
  }
}
