import EventProtocol
import EventServer

/// The video service's server application: it tracks each video from upload to view, tells the sender and
/// the recipient through their queues, and says which blobs to delete.
///
/// Rules (from the seeds; `docs/video-messaging.md` explains each):
/// - `uploaded` comes from the sender once the file is in blob storage; a repeat is a no-op; an id or blob
///   already used by another video is refused.
/// - `downloaded` and `viewed` come from the recipient; `deleted` from the sender. Anyone else is refused.
/// - A status never goes back: the farthest along wins, and a command that would not move it emits nothing.
/// - A command about a video the server does not track (deleted, or never uploaded) is logged and dropped.
/// - A blob is deleted once its video is downloaded (or viewed) or deleted; blobs no `uploaded` ever claimed
///   are swept after a grace period (``unclaimedBlobs(in:now:grace:)``).
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

  /// The tracked videos.
  public private(set) var videos: [VideoID: TrackedVideo] = [:]
  /// Blobs to delete, oldest first, until ``takeBlobDeletions()`` hands them to the shell.
  public private(set) var pendingBlobDeletions: [BlobKey] = []
  /// The latest commands dropped because their video is not tracked (at most 100), for logs.
  public private(set) var droppedCommands: [String] = []
  /// Who started the upload under each blob key: the only user who may write it.
  public private(set) var uploadOwners: [BlobKey: UserID] = [:]

  private enum CodingKeys: String, CodingKey {
    case videos
    case pendingBlobDeletions
    case droppedCommands
    case uploadOwners
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    videos = try container.decode([VideoID: TrackedVideo].self, forKey: .videos)
    pendingBlobDeletions = try container.decode([BlobKey].self, forKey: .pendingBlobDeletions)
    droppedCommands = try container.decode([String].self, forKey: .droppedCommands)
    // State written before uploads were bound to their uploader has none.
    uploadOwners = try container.decodeIfPresent([BlobKey: UserID].self, forKey: .uploadOwners) ?? [:]
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(videos, forKey: .videos)
    try container.encode(pendingBlobDeletions, forKey: .pendingBlobDeletions)
    try container.encode(droppedCommands, forKey: .droppedCommands)
    try container.encode(uploadOwners, forKey: .uploadOwners)
  }

  /// An empty service.
  public init() {}

  public func snapshot(for user: UserID) -> VideoSnapshot {
    let mine = videos.values.sorted { $0.id < $1.id }
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
    switch command {
    case .uploaded(let upload): return try uploaded(upload, from: user)
    case .downloaded(let video): return try advance(video, to: .downloaded, by: user)
    case .viewed(let video): return try advance(video, to: .viewed, by: user)
    case .deleted(let video): return try delete(video, by: user)
    case .uploadStarted(let key):
      if let owner = uploadOwners[key] {
        guard owner == user else { throw CommandRejection("blob \(key) is another user's upload") }
        return []
      }
      uploadOwners[key] = user
      return []
    }
  }

  private mutating func uploaded(
    _ upload: VideoUpload,
    from user: UserID
  ) throws(CommandRejection) -> [Delivery<VideoEvent>] {
    if let known = videos[upload.video] {
      guard known.sender == user else { throw CommandRejection("video \(upload.video) belongs to another sender") }
      drop("repeated uploaded for \(upload.video)")
      return []
    }
    guard upload.size >= 0 else { throw CommandRejection("a video cannot have a negative size") }
    guard !upload.video.rawValue.isEmpty, !upload.recipient.rawValue.isEmpty, !upload.blobKey.rawValue.isEmpty else {
      throw CommandRejection("a video needs an id, a recipient and a blob key")
    }
    guard !videos.values.contains(where: { $0.blobKey == upload.blobKey }) else {
      throw CommandRejection("blob \(upload.blobKey) belongs to another video")
    }
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
    by user: UserID
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
      deliveries.append(Delivery(to: [video.recipient], event: .incomingGone(VideoRef(video: id))))
      releaseBlob(of: &video)
    }
    videos[id] = video
    return deliveries
  }

  private mutating func delete(_ id: VideoID, by user: UserID) throws(CommandRejection) -> [Delivery<VideoEvent>] {
    guard var video = videos[id] else {
      drop("deleted for untracked video \(id)")
      return []
    }
    guard video.sender == user else { throw CommandRejection("only the sender of \(id) may delete it") }
    var deliveries = [Delivery(to: [video.sender], event: VideoEvent.untracked(VideoRef(video: id)))]
    if video.status == .uploaded {
      deliveries.append(Delivery(to: [video.recipient], event: .incomingGone(VideoRef(video: id))))
    }
    releaseBlob(of: &video)
    videos[id] = nil
    return deliveries
  }

  private mutating func releaseBlob(of video: inout TrackedVideo) {
    guard !video.blobReleased else { return }
    video.blobReleased = true
    pendingBlobDeletions.append(video.blobKey)
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
