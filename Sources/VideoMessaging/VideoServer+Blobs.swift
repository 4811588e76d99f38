import EventProtocol
import EventServer

/// Blob keys: who may write, claim and read each, what each user's blobs weigh, and which to delete.
extension VideoServer {
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

  // MARK: - Changes

  /// Binds `key` to `user` unless it already is: refused when it is another user's, was released, or the
  /// user has too many uploads waiting.
  mutating func bind(_ key: BlobKey, to user: UserID) throws(CommandRejection) {
    try Self.check(key.rawValue, "a blob key", limits.maximumBlobKeyBytes)
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

  /// The upload under `key` completed with `size` bytes.
  mutating func completed(_ key: BlobKey, size: Int, by user: UserID) throws(CommandRejection) {
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

  /// The uploader (or the janitor on their behalf) gives up an upload no video claimed.
  mutating func abandoned(_ key: BlobKey, by user: UserID, now: Timestamp) throws(CommandRejection) {
    guard let binding = blobBindings[key], binding.owner == user, binding.isUploading else {
      throw CommandRejection("blob \(key) is not an upload of yours waiting for its notice")
    }
    footprints[user]!.uploading.remove(key)
    footprints[user]!.bytes -= countedBytes(binding)
    pendingBlobDeletions.append(key)
    remember(released: key, owner: user, now: now)
  }

  /// `upload` claims its blob key for its video: refused when the key is another user's, claimed, released,
  /// of another size, or would take the sender over their bytes.
  mutating func claim(_ upload: VideoUpload, by user: UserID) throws(CommandRejection) {
    let footprint = footprints[user, default: Footprint()]
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
  }

  /// What a binding not released counts toward its owner's bytes: the uploaded size, or for a key bound by
  /// its notice alone, the size the video declared.
  func countedBytes(_ binding: BlobBinding) -> Int {
    if let size = binding.size { return size }
    return binding.video.flatMap { videos[$0]?.size } ?? 0
  }

  /// Releases a video's blob: nobody may read it from now on, it is handed out for deletion, and its key is
  /// never bound again (while remembered: ``VideoServerLimits/maximumReleasedKeysPerUser``).
  mutating func releaseBlob(of video: inout TrackedVideo, now: Timestamp) {
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
