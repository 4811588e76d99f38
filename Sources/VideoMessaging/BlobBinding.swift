import EventProtocol

/// What the server knows of a blob key: who uploads under it, the one video that claimed it, and whether it
/// was released. Keys are not capabilities: a key is bound to its first uploader (at upload start, or by the
/// `uploaded` notice that first names it), only that user's video may claim it, only once, and a released
/// key is never bound again (`docs/security.md`).
public struct BlobBinding: Codable, Sendable, Hashable {
  /// The user who uploads under the key: the only one who may write it or name it in `uploaded`.
  public var owner: UserID
  /// The video that claimed the key, once its `uploaded` notice was applied.
  public var video: VideoID?
  /// The blob's size once its upload completed (through the blob routes); `nil` before, or when the key
  /// was bound by a notice alone.
  public var size: Int?
  /// When the key was released (its video downloaded, viewed or deleted): it can no longer be written,
  /// read or claimed.
  public var releasedAt: Timestamp?

  /// Creates a BlobBinding from its parts.
  public init(owner: UserID, video: VideoID? = nil, size: Int? = nil, releasedAt: Timestamp? = nil) {
    self.owner = owner
    self.video = video
    self.size = size
    self.releasedAt = releasedAt
  }

  /// Whether the key is bound to its owner and not yet claimed by a video: an upload in progress, or done
  /// and waiting for its notice.
  public var isUploading: Bool { video == nil && releasedAt == nil }
}

/// How much one user may keep on the video server: every id and string bounded, every collection per user
/// bounded, so one user cannot grow the server's memory, its log or its snapshots without limit.
///
/// Lengths are in UTF-8 bytes, as `Server/openapi.yaml` states them.
public struct VideoServerLimits: Codable, Sendable, Hashable {
  /// The longest video id (a ``VideoID/make(at:using:)`` id is 38).
  public var maximumVideoIDBytes = 64
  /// The longest user id a video may name as its recipient.
  public var maximumUserIDBytes = 64
  /// The longest blob key (what the blob routes accept).
  public var maximumBlobKeyBytes = 160
  /// The largest video file.
  public var maximumVideoBytes = 1 << 30
  /// The most bytes one user's blobs may take: completed uploads and videos not yet released, counted
  /// here, plus uploads in progress, which the blob routes add before storing each chunk.
  public var maximumBytesPerUser = 8 << 30
  /// The most videos one sender may have tracked at once (any status; deleting one frees its place).
  public var maximumVideosPerSender = 10_000
  /// The most videos one sender may have waiting for their recipients (status uploaded).
  public var maximumVideosInFlightPerSender = 1_000
  /// The most keys one user may have bound and not yet claimed (uploads in progress or waiting for their
  /// notice); with ``maximumVideoBytes`` it bounds the bytes a user's uploads may take.
  public var maximumUploadsPerUser = 64
  /// How many released keys are remembered per user, so none is bound again; past this the oldest is
  /// forgotten (its blob was deleted at the janitor's run that followed its release).
  public var maximumReleasedKeysPerUser = 10_000
  /// The longest caption, in UTF-8 bytes.
  public var maximumCaptionBytes = 2_000

  /// The defaults.
  public init() {}

  /// Decodes the bounds a server saved; a bound added since (``maximumCaptionBytes``) takes its default.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    func bound(_ key: CodingKeys, _ initial: Int) throws -> Int {
      try container.decodeIfPresent(Int.self, forKey: key) ?? initial
    }
    let defaults = VideoServerLimits()
    maximumVideoIDBytes = try bound(.maximumVideoIDBytes, defaults.maximumVideoIDBytes)
    maximumUserIDBytes = try bound(.maximumUserIDBytes, defaults.maximumUserIDBytes)
    maximumBlobKeyBytes = try bound(.maximumBlobKeyBytes, defaults.maximumBlobKeyBytes)
    maximumVideoBytes = try bound(.maximumVideoBytes, defaults.maximumVideoBytes)
    maximumBytesPerUser = try bound(.maximumBytesPerUser, defaults.maximumBytesPerUser)
    maximumVideosPerSender = try bound(.maximumVideosPerSender, defaults.maximumVideosPerSender)
    maximumVideosInFlightPerSender = try bound(
      .maximumVideosInFlightPerSender,
      defaults.maximumVideosInFlightPerSender
    )
    maximumUploadsPerUser = try bound(.maximumUploadsPerUser, defaults.maximumUploadsPerUser)
    maximumReleasedKeysPerUser = try bound(.maximumReleasedKeysPerUser, defaults.maximumReleasedKeysPerUser)
    maximumCaptionBytes = try bound(.maximumCaptionBytes, defaults.maximumCaptionBytes)
  }
}
