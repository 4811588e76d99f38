import EventProtocol
import EventServer

/// Blob keys in the tables: the same rules as ``VideoServer``'s (who may write, claim and read each key,
/// what each user's blobs weigh, which to delete), where the in-memory server's per-user counts are
/// queries on the bindings' index by owner.
extension StoredVideoServer {
  /// Binds `key` to `user` unless it already is: refused when it is another user's, was released, or the
  /// user has too many uploads waiting.
  func bind(_ key: BlobKey, to user: UserID, in tables: VideoTables) async throws {
    try VideoServer.check(key.rawValue, "a blob key", limits.maximumBlobKeyBytes)
    if let binding = try await tables.binding(key) {
      guard binding.owner == user, binding.releasedAt == nil else {
        throw CommandRejection("blob \(key) is not yours to write")
      }
      return
    }
    guard try await tables.uploads(of: user).count < limits.maximumUploadsPerUser else {
      throw CommandRejection(
        "you have \(limits.maximumUploadsPerUser) uploads waiting for their notice: finish or delete one first"
      )
    }
    try await tables.insert(BlobBinding(owner: user), of: key)
  }

  /// The upload under `key` completed with `size` bytes.
  func completed(_ key: BlobKey, size: Int, by user: UserID, in tables: VideoTables) async throws {
    guard var binding = try await tables.binding(key), binding.owner == user, binding.isUploading else {
      throw CommandRejection("blob \(key) is not an upload of yours in progress")
    }
    guard (0...limits.maximumVideoBytes).contains(size) else {
      throw CommandRejection("a video is 0 to \(limits.maximumVideoBytes) bytes")
    }
    let change = size - (binding.size ?? 0)
    guard try await tables.storedBytes(of: user) + change <= limits.maximumBytesPerUser else {
      throw CommandRejection("your blobs would be over \(limits.maximumBytesPerUser) bytes: delete some first")
    }
    binding.size = size
    try await tables.save(binding, of: key)
  }

  /// The uploader (or the janitor on their behalf) gives up an upload no video claimed.
  func abandoned(_ key: BlobKey, by user: UserID, now: Timestamp, in tables: VideoTables) async throws {
    guard let binding = try await tables.binding(key), binding.owner == user, binding.isUploading else {
      throw CommandRejection("blob \(key) is not an upload of yours waiting for its notice")
    }
    try await tables.queueDeletion(key)
    try await remember(released: key, owner: user, now: now, in: tables)
  }

  /// `upload` claims its blob key for its video: refused when the key is another user's, claimed, released,
  /// of another size, or would take the sender over their bytes.
  func claim(_ upload: VideoUpload, by user: UserID, in tables: VideoTables) async throws {
    let bytes = try await tables.storedBytes(of: user)
    if let binding = try await tables.binding(upload.blobKey) {
      guard binding.owner == user, binding.isUploading else {
        throw CommandRejection("blob \(upload.blobKey) is not yours to claim")
      }
      if let size = binding.size, size != upload.size {
        throw CommandRejection("the video declares \(upload.size) bytes, but its blob holds \(size)")
      }
      if binding.size == nil, bytes + upload.size > limits.maximumBytesPerUser {
        throw CommandRejection("your blobs would be over \(limits.maximumBytesPerUser) bytes: delete some first")
      }
    } else {
      guard bytes + upload.size <= limits.maximumBytesPerUser else {
        throw CommandRejection("your blobs would be over \(limits.maximumBytesPerUser) bytes: delete some first")
      }
      // Named before any upload under it (or by a shell without blob routes): the sender becomes its uploader.
      try await bind(upload.blobKey, to: user, in: tables)
    }
    guard var binding = try await tables.binding(upload.blobKey) else { return }
    binding.video = upload.video
    try await tables.save(binding, of: upload.blobKey)
  }

  /// Releases a video's blob: nobody may read it from now on, it is handed out for deletion, and its key is
  /// never bound again (while remembered).
  func releaseBlob(of video: inout VideoServer.TrackedVideo, now: Timestamp, in tables: VideoTables) async throws {
    guard !video.blobReleased else { return }
    video.blobReleased = true
    try await tables.queueDeletion(video.blobKey)
    let owner = try await tables.binding(video.blobKey)?.owner ?? video.sender
    try await remember(released: video.blobKey, owner: owner, now: now, in: tables)
  }

  /// Marks `key` released at `now`, forgetting `owner`'s oldest released key past the bound
  /// (``VideoServerLimits/maximumReleasedKeysPerUser``).
  private func remember(released key: BlobKey, owner: UserID, now: Timestamp, in tables: VideoTables) async throws {
    var binding = try await tables.binding(key) ?? BlobBinding(owner: owner)
    binding.releasedAt = now
    try await tables.save(binding, of: key)
    while try await tables.releasedCount(of: owner) > limits.maximumReleasedKeysPerUser,
      let oldest = try await tables.oldestReleased(of: owner)
    {
      try await tables.deleteBinding(oldest)
    }
  }
}
