import EventProtocol

/// What a user asks the video service to do; each goes through the client's outbox, so it is applied at
/// most once.
public enum VideoCommand: Codable, Sendable, Hashable {
  /// The sender stored the file in blob storage: track the video and tell the recipient.
  case uploaded(VideoUpload)
  /// The recipient has the file.
  case downloaded(VideoID)
  /// The recipient watched it.
  case viewed(VideoID)
  /// The sender no longer wants it tracked (clean-up): the server forgets it and deletes its file.
  case deleted(VideoID)
  /// An upload begins under a blob key: the key is bound to its first uploader, durably (the HTTP server's
  /// blob routes send it before storing the first byte; another user's upload under the key is refused).
  case uploadStarted(BlobKey)
  /// The upload under a key is complete, with this many bytes (the blob routes send it before answering the
  /// completion): the bytes count toward the uploader's bound, and the video that claims the key must
  /// declare this size.
  case uploadCompleted(BlobKey, size: Int)
  /// The uploader gives up an upload no video claimed (the server's janitor sends it for stranded uploads,
  /// on the uploader's behalf): the key is released and its blob deleted.
  case uploadAbandoned(BlobKey)
  /// The sender sets or changes the video's caption (an empty caption removes it), for as long as the video
  /// is in its conversation's history. Anyone else is refused.
  case captioned(VideoID, caption: String)

  /// The video the command is about (`nil` for an upload, which names only a blob key).
  public var video: VideoID? {
    switch self {
    case .uploaded(let upload): upload.video
    case .downloaded(let video), .viewed(let video), .deleted(let video), .captioned(let video, _): video
    case .uploadStarted, .uploadCompleted, .uploadAbandoned: nil
    }
  }
}

/// A sender's notice that a video's file is in blob storage.
public struct VideoUpload: Codable, Sendable, Hashable {
  /// The video.
  public var video: VideoID
  /// Who it is for.
  public var recipient: UserID
  /// Where the file is.
  public var blobKey: BlobKey
  /// The file's size in bytes.
  public var size: Int
  /// The caption it is sent with (`nil` or empty: none); its sender may change it later (``VideoCommand/captioned(_:caption:)``).
  public var caption: String?

  /// Creates a VideoUpload from its parts.
  public init(video: VideoID, recipient: UserID, blobKey: BlobKey, size: Int, caption: String? = nil) {
    self.video = video
    self.recipient = recipient
    self.blobKey = blobKey
    self.size = size
    self.caption = caption
  }
}
