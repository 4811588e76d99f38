import EventProtocol
import JSONCoding

/// What changed, as the video service tells a user's queues. Each case's fields sit beside `id` and
/// `type` on the wire.
///
/// | type | to | fields |
/// | --- | --- | --- |
/// | `video_sent` | the sender | `video`, `recipient`, `sender`, `position`, `caption` (status uploaded); `blob_key`, `size` when sent to yourself |
/// | `video_status` | the sender; for `viewed` after `downloaded`, the recipient too | `video`, `status` |
/// | `video_untracked` | the sender; the recipient too once it had the file | `video`, `reason` |
/// | `video_incoming` | the recipient | `video`, `sender`, `blob_key`, `size`, `position`, `recipient`, `caption` |
/// | `video_incoming_gone` | the recipient | `video`, `reason` |
/// | `video_history_trimmed` | both users | `video` |
/// | `video_caption` | both users | `video`, `caption` (absent: removed) |
///
/// Each status reaches each of the two users once: a video sent to yourself gets one event per change
/// (`video_sent` carries the incoming fields, `video_status` and `video_untracked` also settle the incoming
/// and received lists), never both the sender's and the recipient's.
public enum VideoEvent: TaggedEventPayload, Hashable {
  /// The sender's video is tracked, status uploaded.
  case sent(VideoSent)
  /// The video moved on (to the sender; to the recipient when it was viewed after being downloaded).
  case status(VideoStatusChanged)
  /// The video is no longer tracked, and why (to the sender; to the recipient if it had the file).
  case untracked(VideoGone)
  /// A video waits for the recipient to download it.
  case incoming(IncomingVideoFields)
  /// A video no longer waits for the recipient, and why (downloaded or viewed on one of their devices,
  /// deleted by its sender, expired).
  case incomingGone(VideoGone)
  /// The server let the oldest video of a conversation's history go (`video_history_trimmed`).
  case historyTrimmed(VideoGone)
  /// The sender set, changed or removed a video's caption (`video_caption`, to both users).
  case captioned(VideoCaptionChanged)

  public static let knownEventTypes: Set<String> = [
    "video_sent", "video_status", "video_untracked", "video_incoming", "video_incoming_gone",
    "video_history_trimmed", "video_caption",
  ]

  public var eventType: String {
    switch self {
    case .sent: "video_sent"
    case .status: "video_status"
    case .untracked: "video_untracked"
    case .incoming: "video_incoming"
    case .incomingGone: "video_incoming_gone"
    case .historyTrimmed: "video_history_trimmed"
    case .captioned: "video_caption"
    }
  }

  public var fields: any Encodable & Sendable {
    switch self {
    case .sent(let fields): fields
    case .status(let fields): fields
    case .untracked(let fields), .incomingGone(let fields), .historyTrimmed(let fields): fields
    case .incoming(let fields): fields
    case .captioned(let fields): fields
    }
  }

  /// Creates the fields from their parts.
  public init(type: String, from decoder: any Decoder) throws {
    switch type {
    case "video_sent": self = .sent(try decoder.decodeFields(VideoSent.self))
    case "video_status": self = .status(try decoder.decodeFields(VideoStatusChanged.self))
    case "video_untracked": self = .untracked(try decoder.decodeFields(VideoGone.self))
    case "video_incoming": self = .incoming(try decoder.decodeFields(IncomingVideoFields.self))
    case "video_history_trimmed": self = .historyTrimmed(try decoder.decodeFields(VideoGone.self))
    case "video_caption": self = .captioned(try decoder.decodeFields(VideoCaptionChanged.self))
    default: self = .incomingGone(try decoder.decodeFields(VideoGone.self))
    }
  }
}

/// Why a video left a list: what `video_incoming_gone` and `video_untracked` say, so an app can tell "you
/// already have it" from "it was deleted".
public enum VideoGoneReason: String, Codable, Sendable, Hashable {
  /// Downloaded, on this device or another of the recipient's.
  case downloaded
  /// Viewed, on this device or another of the recipient's.
  case viewed
  /// Its sender deleted it.
  case deleted
  /// Nobody downloaded it within ``VideoRetention/waitingForDownload``: its file is deleted.
  case expired
  /// Downloaded or viewed long enough ago that the server forgot it (``VideoRetention``).
  case retired
}

/// The fields of `video_sent`.
public struct VideoSent: Codable, Sendable, Hashable {
  /// The video.
  public var video: VideoID
  /// Who it was sent to.
  public var recipient: UserID
  /// Where its file is, when it was sent to yourself (it is then also incoming).
  public var blobKey: BlobKey?
  /// Its size in bytes, when it was sent to yourself.
  public var size: Int?
  /// Who sent it (absent from servers before the history narrows).
  public var sender: UserID?
  /// Its place in the conversation's history (absent from servers before the history narrows).
  public var position: Int?
  /// The caption it was sent with (absent: none).
  public var caption: String?

  /// Creates the fields from their parts.
  public init(
    video: VideoID,
    recipient: UserID,
    blobKey: BlobKey? = nil,
    size: Int? = nil,
    sender: UserID? = nil,
    position: Int? = nil,
    caption: String? = nil
  ) {
    self.video = video
    self.recipient = recipient
    self.blobKey = blobKey
    self.size = size
    self.sender = sender
    self.position = position
    self.caption = caption
  }

  private enum CodingKeys: String, CodingKey {
    case video
    case recipient
    case blobKey = "blob_key"
    case size
    case sender
    case position
    case caption
  }
}

/// The fields of `video_status`.
public struct VideoStatusChanged: Codable, Sendable, Hashable {
  /// The video.
  public var video: VideoID
  /// Its new status.
  public var status: VideoStatus

  /// Creates the fields from their parts.
  public init(video: VideoID, status: VideoStatus) {
    self.video = video
    self.status = status
  }
}

/// The fields of `video_untracked` and `video_incoming_gone`: the video, and why it left.
public struct VideoGone: Codable, Sendable, Hashable {
  /// The video.
  public var video: VideoID
  /// Why; `nil` from a server that did not say.
  public var reason: VideoGoneReason?

  /// Creates the fields from their parts.
  public init(video: VideoID, reason: VideoGoneReason?) {
    self.video = video
    self.reason = reason
  }
}

/// The fields of `video_incoming`.
public struct IncomingVideoFields: Codable, Sendable, Hashable {
  /// The video.
  public var video: VideoID
  /// Who sent it.
  public var sender: UserID
  /// Where its file is.
  public var blobKey: BlobKey
  /// Its size in bytes.
  public var size: Int
  /// Its place in the conversation's history (absent from servers before the history narrows).
  public var position: Int?
  /// Who it was sent to: the receiving user (absent from servers before the history narrows).
  public var recipient: UserID?
  /// The caption it was sent with (absent: none).
  public var caption: String?

  /// Creates the fields from their parts.
  public init(
    video: VideoID,
    sender: UserID,
    blobKey: BlobKey,
    size: Int,
    position: Int? = nil,
    recipient: UserID? = nil,
    caption: String? = nil
  ) {
    self.video = video
    self.sender = sender
    self.blobKey = blobKey
    self.size = size
    self.position = position
    self.recipient = recipient
    self.caption = caption
  }

  private enum CodingKeys: String, CodingKey {
    case video
    case sender
    case blobKey = "blob_key"
    case size
    case position
    case recipient
    case caption
  }
}

/// The fields of `video_caption`: the video, and its caption now (`nil`, absent on the wire: removed).
public struct VideoCaptionChanged: Codable, Sendable, Hashable {
  /// The video.
  public var video: VideoID
  /// Its caption now; `nil` when its sender removed it.
  public var caption: String?

  /// Creates the fields from their parts.
  public init(video: VideoID, caption: String?) {
    self.video = video
    self.caption = caption
  }
}
