import EventProtocol
import JSONCoding

// The video events' fields write and read themselves on the package's own coder (`JSONFieldsCodable`, the
// opt-in beside `Codable`); `VideoEventFieldsTests` holds each type to its `Codable` path and Foundation's.

extension VideoSent: JSONFieldsCodable {
  public func encodeFields(to fields: inout JSONFieldsWriter) throws {
    try fields.encode(video.rawValue, forKey: "video")
    try fields.encode(recipient.rawValue, forKey: "recipient")
    try fields.encodeIfPresent(blobKey?.rawValue, forKey: "blob_key")
    try fields.encodeIfPresent(size, forKey: "size")
    try fields.encodeIfPresent(sender?.rawValue, forKey: "sender")
    try fields.encodeIfPresent(position, forKey: "position")
    try fields.encodeIfPresent(caption, forKey: "caption")
  }

  public init(fields: JSONFieldsReader) throws {
    self.init(
      video: VideoID(rawValue: try fields.decode(String.self, forKey: "video")),
      recipient: UserID(rawValue: try fields.decode(String.self, forKey: "recipient")),
      blobKey: try fields.decodeIfPresent(String.self, forKey: "blob_key").map(BlobKey.init(rawValue:)),
      size: try fields.decodeIfPresent(Int.self, forKey: "size"),
      sender: try fields.decodeIfPresent(String.self, forKey: "sender").map(UserID.init(rawValue:)),
      position: try fields.decodeIfPresent(Int.self, forKey: "position"),
      caption: try fields.decodeIfPresent(String.self, forKey: "caption")
    )
  }
}

extension VideoStatusChanged: JSONFieldsCodable {
  public func encodeFields(to fields: inout JSONFieldsWriter) throws {
    try fields.encode(video.rawValue, forKey: "video")
    try fields.encode(status, forKey: "status")
  }

  public init(fields: JSONFieldsReader) throws {
    self.init(
      video: VideoID(rawValue: try fields.decode(String.self, forKey: "video")),
      status: try fields.decode(VideoStatus.self, forKey: "status")
    )
  }
}

extension VideoGone: JSONFieldsCodable {
  public func encodeFields(to fields: inout JSONFieldsWriter) throws {
    try fields.encode(video.rawValue, forKey: "video")
    try fields.encodeIfPresent(reason, forKey: "reason")
  }

  public init(fields: JSONFieldsReader) throws {
    self.init(
      video: VideoID(rawValue: try fields.decode(String.self, forKey: "video")),
      reason: try fields.decodeIfPresent(VideoGoneReason.self, forKey: "reason")
    )
  }
}

extension IncomingVideoFields: JSONFieldsCodable {
  public func encodeFields(to fields: inout JSONFieldsWriter) throws {
    try fields.encode(video.rawValue, forKey: "video")
    try fields.encode(sender.rawValue, forKey: "sender")
    try fields.encode(blobKey.rawValue, forKey: "blob_key")
    try fields.encode(size, forKey: "size")
    try fields.encodeIfPresent(position, forKey: "position")
    try fields.encodeIfPresent(recipient?.rawValue, forKey: "recipient")
    try fields.encodeIfPresent(caption, forKey: "caption")
  }

  public init(fields: JSONFieldsReader) throws {
    self.init(
      video: VideoID(rawValue: try fields.decode(String.self, forKey: "video")),
      sender: UserID(rawValue: try fields.decode(String.self, forKey: "sender")),
      blobKey: BlobKey(rawValue: try fields.decode(String.self, forKey: "blob_key")),
      size: try fields.decode(Int.self, forKey: "size"),
      position: try fields.decodeIfPresent(Int.self, forKey: "position"),
      recipient: try fields.decodeIfPresent(String.self, forKey: "recipient").map(UserID.init(rawValue:)),
      caption: try fields.decodeIfPresent(String.self, forKey: "caption")
    )
  }
}

extension VideoCaptionChanged: JSONFieldsCodable {
  public func encodeFields(to fields: inout JSONFieldsWriter) throws {
    try fields.encode(video.rawValue, forKey: "video")
    try fields.encodeIfPresent(caption, forKey: "caption")
  }

  public init(fields: JSONFieldsReader) throws {
    self.init(
      video: VideoID(rawValue: try fields.decode(String.self, forKey: "video")),
      caption: try fields.decodeIfPresent(String.self, forKey: "caption")
    )
  }
}
