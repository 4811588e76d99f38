import EventProtocol
import EventServer

/// The video service's server application: it tracks each video from upload to view, tells the sender and
/// the recipient through their queues, and says which blobs to delete.
///
/// Rules (from the seeds; `docs/video-messaging.md` explains each, `docs/security.md` the bounds):
/// - `uploaded` comes from the sender once the file is in blob storage; a repeat is a no-op; an id already
///   used by another video is refused, and so is a blob key bound to another user, already claimed by another
///   video, or released (keys are not capabilities: ``BlobBinding``).
/// - `downloaded` and `viewed` come from the recipient; `deleted` from the sender. Anyone else is refused.
/// - A status never goes back: the farthest along wins, and a command that would not move it emits nothing.
/// - A command about a video the server does not track (deleted, or never uploaded) is logged and dropped.
/// - A blob is released once its video is downloaded (or viewed) or deleted: from then on nobody may read it,
///   and it is deleted; blobs no `uploaded` ever claimed are swept after a grace period
///   (``unclaimedBlobs(in:now:grace:)``).
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
  }

  /// The tracked videos.
  public private(set) var videos: [VideoID: TrackedVideo] = [:]
  /// Blobs to delete, oldest first, until ``takeBlobDeletions()`` hands them to the shell.
  public private(set) var pendingBlobDeletions: [BlobKey] = []
  /// The latest commands dropped because their video is not tracked (at most 100), for logs.
  public private(set) var droppedCommands: [String] = []
  /// Every blob key the server has bound: to its uploader, to the video that claimed it, and whether it was
  /// released.
  public private(set) var blobBindings: [BlobKey: BlobBinding] = [:]
  /// The bounds on what each user may keep.
  public let limits: VideoServerLimits
  /// Derived from the videos and bindings; rebuilt when decoded.
  private var footprints: [UserID: Footprint] = [:]

  /// The user who uploads under each blob key that is not released: the only user who may write it.
  public func uploadOwner(of key: BlobKey) -> UserID? {
    guard let binding = blobBindings[key], binding.releasedAt == nil else { return nil }
    return binding.owner
  }

  /// The keys `user` has bound and no video claimed yet (uploads in progress or waiting for their notice).
  public func uploads(of user: UserID) -> Set<BlobKey> { footprints[user]?.uploading ?? [] }

  /// The bytes of `user`'s blobs that count toward ``VideoServerLimits/maximumBytesPerUser``: completed
  /// uploads and claimed videos not yet released (uploads in progress are the blob routes' to add).
  public func storedBytes(of user: UserID) -> Int { footprints[user]?.bytes ?? 0 }

  /// Whether `user` may read the blob under `key`: the sender or the recipient of the video that claimed it,
  /// until the blob is released.
  public func mayRead(_ key: BlobKey, user: UserID) -> Bool {
    guard let binding = blobBindings[key], binding.releasedAt == nil, let id = binding.video,
      let video = videos[id], !video.blobReleased
    else { return false }
    return video.sender == user || video.recipient == user
  }

  private enum CodingKeys: String, CodingKey {
    case videos
    case pendingBlobDeletions
    case droppedCommands
    case blobBindings
    case uploadOwners
    case limits
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    videos = try container.decode([VideoID: TrackedVideo].self, forKey: .videos)
    pendingBlobDeletions = try container.decode([BlobKey].self, forKey: .pendingBlobDeletions)
    droppedCommands = try container.decode([String].self, forKey: .droppedCommands)
    limits = try container.decodeIfPresent(VideoServerLimits.self, forKey: .limits) ?? VideoServerLimits()
    if let bindings = try container.decodeIfPresent([BlobKey: BlobBinding].self, forKey: .blobBindings) {
      blobBindings = bindings
    } else {
      // State written before keys were bound to videos: uploaders only, and each tracked video's claim.
      let owners = try container.decodeIfPresent([BlobKey: UserID].self, forKey: .uploadOwners) ?? [:]
      blobBindings = owners.mapValues { BlobBinding(owner: $0) }
      for video in videos.values {
        blobBindings[video.blobKey] = BlobBinding(
          owner: video.sender,
          video: video.id,
          releasedAt: video.blobReleased ? Timestamp(sinceEpoch: .zero) : nil
        )
      }
    }
    rebuildFootprints()
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(videos, forKey: .videos)
    try container.encode(pendingBlobDeletions, forKey: .pendingBlobDeletions)
    try container.encode(droppedCommands, forKey: .droppedCommands)
    try container.encode(blobBindings, forKey: .blobBindings)
    try container.encode(limits, forKey: .limits)
  }

  /// An empty service with these bounds.
  public init(limits: VideoServerLimits = VideoServerLimits()) {
    self.limits = limits
  }

  public static func == (lhs: VideoServer, rhs: VideoServer) -> Bool {
    lhs.videos == rhs.videos && lhs.pendingBlobDeletions == rhs.pendingBlobDeletions
      && lhs.droppedCommands == rhs.droppedCommands && lhs.blobBindings == rhs.blobBindings
      && lhs.limits == rhs.limits
  }

  private mutating func rebuildFootprints() {
    footprints = [:]
    for video in videos.values {
      footprints[video.sender, default: Footprint()].tracked += 1
      if video.status == .uploaded { footprints[video.sender, default: Footprint()].inFlight += 1 }
    }
    let released = blobBindings.compactMap { key, binding in binding.releasedAt.map { (binding.owner, $0, key) } }
    for (owner, _, key) in released.sorted(by: { ($0.1, $0.2) < ($1.1, $1.2) }) {
      footprints[owner, default: Footprint()].released.append(key)
    }
    for (key, binding) in blobBindings where binding.releasedAt == nil {
      if binding.isUploading { footprints[binding.owner, default: Footprint()].uploading.insert(key) }
      footprints[binding.owner, default: Footprint()].bytes += countedBytes(binding)
    }
  }

  /// What a binding not released counts toward its owner's bytes: the uploaded size, or for a key bound by
  /// its notice alone, the size the video declared.
  private func countedBytes(_ binding: BlobBinding) -> Int {
    if let size = binding.size { return size }
    return binding.video.flatMap { videos[$0]?.size } ?? 0
  }

  public func snapshot(for user: UserID) -> VideoSnapshot {
    let mine = videos.values.filter { $0.sender == user || $0.recipient == user }.sorted { $0.id < $1.id }
    return VideoSnapshot(
      outgoing: mine.filter { $0.sender == user }.map {
        OutgoingVideo(id: $0.id, recipient: $0.recipient, status: $0.status)
      },
      incoming: mine.filter { $0.recipient == user && $0.status == .uploaded }
        .map { IncomingVideo(id: $0.id, sender: $0.sender, blobKey: $0.blobKey, size: $0.size) }
    )
  }

  public mutating func handle(
    _ command: VideoCommand,
    from user: UserID
  ) throws(CommandRejection) -> [Delivery<VideoEvent>] {
    try handle(command, from: user, at: Timestamp(sinceEpoch: .zero))
  }

  public mutating func handle(
    _ command: VideoCommand,
    from user: UserID,
    at now: Timestamp
  ) throws(CommandRejection) -> [Delivery<VideoEvent>] {
    switch command {
    case .downloaded(let video), .viewed(let video), .deleted(let video):
      try check(video.rawValue, "a video id", limits.maximumVideoIDBytes)
    case .uploaded, .uploadStarted, .uploadCompleted, .uploadAbandoned:
      break
    }
    switch command {
    case .uploaded(let upload): return try uploaded(upload, from: user, now: now)
    case .downloaded(let video): return try advance(video, to: .downloaded, by: user, now: now)
    case .viewed(let video): return try advance(video, to: .viewed, by: user, now: now)
    case .deleted(let video): return try delete(video, by: user, now: now)
    case .uploadStarted(let key):
      try bind(key, to: user)
      return []
    case .uploadCompleted(let key, let size):
      try completed(key, size: size, by: user)
      return []
    case .uploadAbandoned(let key):
      guard let binding = blobBindings[key], binding.owner == user, binding.isUploading else {
        throw CommandRejection("blob \(key) is not an upload of yours waiting for its notice")
      }
      footprints[user]!.uploading.remove(key)
      footprints[user]!.bytes -= countedBytes(binding)
      pendingBlobDeletions.append(key)
      remember(released: key, owner: user, now: now)
      return []
    }
  }

  private mutating func completed(_ key: BlobKey, size: Int, by user: UserID) throws(CommandRejection) {
    guard let binding = blobBindings[key], binding.owner == user, binding.releasedAt == nil, binding.video == nil
    else { throw CommandRejection("blob \(key) is not an upload of yours in progress") }
    guard (0...limits.maximumVideoBytes).contains(size) else {
      throw CommandRejection("a video is 0 to \(limits.maximumVideoBytes) bytes")
    }
    let change = size - (binding.size ?? 0)
    guard footprints[user, default: Footprint()].bytes + change <= limits.maximumBytesPerUser else {
      throw CommandRejection("your blobs would be over \(limits.maximumBytesPerUser) bytes: delete some first")
    }
    blobBindings[key]!.size = size
    footprints[user]!.bytes += change
  }

  /// Binds `key` to `user` unless it already is: refused when it is another user's, was released, or the
  /// user has too many uploads waiting.
  private mutating func bind(_ key: BlobKey, to user: UserID) throws(CommandRejection) {
    try check(key.rawValue, "a blob key", limits.maximumBlobKeyBytes)
    if let binding = blobBindings[key] {
      guard binding.owner == user, binding.releasedAt == nil else {
        throw CommandRejection("blob \(key) is not yours to write")
      }
      return
    }
    guard footprints[user, default: Footprint()].uploading.count < limits.maximumUploadsPerUser else {
      throw CommandRejection(
        "you have \(limits.maximumUploadsPerUser) uploads waiting for their notice: finish or delete one first"
      )
    }
    blobBindings[key] = BlobBinding(owner: user)
    footprints[user, default: Footprint()].uploading.insert(key)
  }

  private func check(_ text: String, _ what: String, _ maximum: Int) throws(CommandRejection) {
    guard (1...maximum).contains(text.utf8.count) else {
      throw CommandRejection("\(what) must be 1 to \(maximum) bytes")
    }
  }

  private mutating func uploaded(
    _ upload: VideoUpload,
    from user: UserID,
    now: Timestamp
  ) throws(CommandRejection) -> [Delivery<VideoEvent>] {
    try check(upload.video.rawValue, "a video id", limits.maximumVideoIDBytes)
    try check(upload.recipient.rawValue, "a recipient", limits.maximumUserIDBytes)
    try check(upload.blobKey.rawValue, "a blob key", limits.maximumBlobKeyBytes)
    if let known = videos[upload.video] {
      guard known.sender == user else { throw CommandRejection("video \(upload.video) belongs to another sender") }
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
    if let binding = blobBindings[upload.blobKey] {
      guard binding.owner == user, binding.releasedAt == nil, binding.video == nil else {
        throw CommandRejection("blob \(upload.blobKey) is not yours to claim")
      }
      if let size = binding.size, size != upload.size {
        throw CommandRejection("the video declares \(upload.size) bytes, but its blob holds \(size)")
      }
      if binding.size == nil, footprint.bytes + upload.size > limits.maximumBytesPerUser {
        throw CommandRejection("your blobs would be over \(limits.maximumBytesPerUser) bytes: delete some first")
      }
    } else {
      guard footprint.bytes + upload.size <= limits.maximumBytesPerUser else {
        throw CommandRejection("your blobs would be over \(limits.maximumBytesPerUser) bytes: delete some first")
      }
      // Named before any upload under it (or by a shell without blob routes): the sender becomes its uploader.
      try bind(upload.blobKey, to: user)
    }
    if blobBindings[upload.blobKey]!.size == nil { footprints[user]!.bytes += upload.size }
    blobBindings[upload.blobKey]!.video = upload.video
    footprints[user]!.uploading.remove(upload.blobKey)
    footprints[user]!.tracked += 1
    footprints[user]!.inFlight += 1
    videos[upload.video] = TrackedVideo(
      id: upload.video,
      sender: user,
      recipient: upload.recipient,
      blobKey: upload.blobKey,
      size: upload.size,
      status: .uploaded,
      blobReleased: false
    )
    return [
      Delivery(to: [user], event: .sent(VideoSent(video: upload.video, recipient: upload.recipient))),
      Delivery(
        to: [upload.recipient],
        event: .incoming(
          IncomingVideoFields(video: upload.video, sender: user, blobKey: upload.blobKey, size: upload.size)
        )
      ),
    ]
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
    var deliveries = [
      Delivery(to: [video.sender], event: VideoEvent.status(VideoStatusChanged(video: id, status: status)))
    ]
    if wasWaiting {
      footprints[video.sender]!.inFlight -= 1
      deliveries.append(Delivery(to: [video.recipient], event: .incomingGone(VideoRef(video: id))))
      releaseBlob(of: &video, now: now)
    }
    videos[id] = video
    return deliveries
  }

  private mutating func delete(
    _ id: VideoID,
    by user: UserID,
    now: Timestamp
  ) throws(CommandRejection) -> [Delivery<VideoEvent>] {
    guard var video = videos[id] else {
      drop("deleted for untracked video \(id)")
      return []
    }
    guard video.sender == user else { throw CommandRejection("only the sender of \(id) may delete it") }
    var deliveries = [Delivery(to: [video.sender], event: VideoEvent.untracked(VideoRef(video: id)))]
    if video.status == .uploaded {
      footprints[video.sender]!.inFlight -= 1
      deliveries.append(Delivery(to: [video.recipient], event: .incomingGone(VideoRef(video: id))))
    }
    releaseBlob(of: &video, now: now)
    footprints[video.sender]!.tracked -= 1
    videos[id] = nil
    return deliveries
  }

  /// Releases a video's blob: nobody may read it from now on, it is handed out for deletion, and its key is
  /// never bound again (while remembered: ``VideoServerLimits/maximumReleasedKeysPerUser``).
  private mutating func releaseBlob(of video: inout TrackedVideo, now: Timestamp) {
    guard !video.blobReleased else { return }
    video.blobReleased = true
    pendingBlobDeletions.append(video.blobKey)
    let key = video.blobKey
    let owner = blobBindings[key]?.owner ?? video.sender
    if let binding = blobBindings[key], binding.releasedAt == nil {
      footprints[owner, default: Footprint()].bytes -= binding.size ?? video.size
    }
    remember(released: key, owner: owner, now: now)
  }

  /// Marks `key` released at `now` and remembers it among its owner's released keys, forgetting the oldest
  /// past the bound.
  private mutating func remember(released key: BlobKey, owner: UserID, now: Timestamp) {
    blobBindings[key, default: BlobBinding(owner: owner)].releasedAt = now
    // Kept in (release time, key) order, as a rebuild from a snapshot orders them, so a live server and a
    // recovered one forget the same key first.
    var index = footprints[owner, default: Footprint()].released.endIndex
    while index > 0, let previous = blobBindings[footprints[owner]!.released[index - 1]]?.releasedAt,
      (previous, footprints[owner]!.released[index - 1]) > (now, key)
    {
      index -= 1
    }
    footprints[owner]!.released.insert(key, at: index)
    if footprints[owner]!.released.count > limits.maximumReleasedKeysPerUser {
      blobBindings[footprints[owner]!.released.removeFirst()] = nil
    }
  }

  private mutating func drop(_ reason: String) {
    droppedCommands.append(reason)
    if droppedCommands.count > 100 { droppedCommands.removeFirst() }
  }

  /// Hands the blobs to delete to the shell (which deletes them from blob storage) and forgets them.
  public mutating func takeBlobDeletions() -> [BlobKey] {
    defer { pendingBlobDeletions = [] }
    return pendingBlobDeletions
  }

  /// The blobs in `listing` that no tracked video claims and that are older than `grace`: files whose
  /// `uploaded` notice never came (seed 000's stranded uploads). The grace must outlast how long an
  /// outbox may keep retrying a notice (7 days is the recommended value).
  public func unclaimedBlobs(in listing: [BlobInfo], now: Timestamp, grace: Duration) -> [BlobKey] {
    let claimed = Set(videos.values.filter { !$0.blobReleased }.map(\.blobKey))
    return listing.filter { !claimed.contains($0.key) && $0.createdAt.advanced(by: grace) <= now }.map(\.key).sorted()
  }
}

/// A blob as blob storage lists it.
public struct BlobInfo: Sendable, Hashable, Codable {
  /// Its key.
  public var key: BlobKey
  /// Its size in bytes.
  public var size: Int
  /// When it was completed.
  public var createdAt: Timestamp

  /// Creates a BlobInfo from its parts.
  public init(key: BlobKey, size: Int, createdAt: Timestamp) {
    self.key = key
    self.size = size
    self.createdAt = createdAt
  }
}

/// The users of the video service and their API tokens: a request's token says who makes it.
public struct VideoAccounts: Sendable, Equatable {
  private var users: [String: UserID] = [:]

  /// No accounts.
  public init() {}

  /// Adds (or replaces) `user`'s token.
  public mutating func add(_ user: UserID, token: String) {
    users = users.filter { $0.value != user }
    users[token] = user
  }

  /// The user a token belongs to.
  /// - Throws: `UNAUTHORIZED` for an unknown token.
  public func authenticate(_ token: String) throws(EventAPIError) -> UserID {
    guard let user = users[token] else { throw .unauthorized() }
    return user
  }
}
