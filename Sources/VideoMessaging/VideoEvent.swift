import EventProtocol

/// What changed, as the video service tells a user's queues. Each case's fields sit beside `id` and
/// `type` on the wire.
///
/// | type | to | fields |
/// | --- | --- | --- |
/// | `video_sent` | the sender | `video`, `recipient` (status uploaded) |
/// | `video_status` | the sender | `video`, `status` (downloaded or viewed) |
/// | `video_untracked` | the sender | `video` (the sender deleted it) |
/// | `video_incoming` | the recipient | `video`, `sender`, `blob_key`, `size` |
/// | `video_incoming_gone` | the recipient | `video` (downloaded, viewed, or deleted by its sender) |
public enum VideoEvent: TaggedEventPayload, Hashable {
  /// The sender's video is tracked, status uploaded.
  case sent(VideoSent)
  /// The sender's video moved on.
  case status(VideoStatusChanged)
  /// The sender's video is no longer tracked (they deleted it).
  case untracked(VideoRef)
  /// A video waits for the recipient to download it.
  case incoming(IncomingVideoFields)
  /// A video no longer waits for the recipient (downloaded, viewed, or deleted by its sender).
  case incomingGone(VideoRef)

  public static let knownEventTypes: Set<String> = [
    "video_sent", "video_status", "video_untracked", "video_incoming", "video_incoming_gone",
  ]

  public var eventType: String {
    switch self {
    case .sent: "video_sent"
    case .status: "video_status"
    case .untracked: "video_untracked"
    case .incoming: "video_incoming"
    case .incomingGone: "video_incoming_gone"
    }
  }

  public var fields: any Encodable & Sendable {
    switch self {
    case .sent(let fields): fields
    case .status(let fields): fields
    case .untracked(let fields), .incomingGone(let fields): fields
    case .incoming(let fields): fields
    }
  }

  /// Creates the fields from their parts.
  public init(type: String, from decoder: any Decoder) throws {
    switch type {
    case "video_sent": self = .sent(try VideoSent(from: decoder))
    case "video_status": self = .status(try VideoStatusChanged(from: decoder))
    case "video_untracked": self = .untracked(try VideoRef(from: decoder))
    case "video_incoming": self = .incoming(try IncomingVideoFields(from: decoder))
    default: self = .incomingGone(try VideoRef(from: decoder))
    }
  }
}

/// The fields of `video_sent`.
public struct VideoSent: Codable, Sendable, Hashable {
  /// The video.
  public var video: VideoID
  /// Who it was sent to.
  public var recipient: UserID

  /// Creates the fields from their parts.
  public init(video: VideoID, recipient: UserID) {
    self.video = video
    self.recipient = recipient
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

/// The fields of events that name one video.
public struct VideoRef: Codable, Sendable, Hashable {
  /// The video.
  public var video: VideoID

  /// Creates the fields from their parts.
  public init(video: VideoID) {
    self.video = video
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

  /// Creates the fields from their parts.
  public init(video: VideoID, sender: UserID, blobKey: BlobKey, size: Int) {
    self.video = video
    self.sender = sender
    self.blobKey = blobKey
    self.size = size
  }

  private enum CodingKeys: String, CodingKey {
    case video
    case sender
    case blobKey = "blob_key"
    case size
  }
}
