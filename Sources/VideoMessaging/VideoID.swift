import EventProtocol

/// A video's id, made by the sender: sortable by creation time and unguessable.
///
/// The form is `<13 decimal digits: milliseconds since the epoch>-<24 hex digits: 96 random bits>`, so
/// comparing two ids as strings compares their creation times (then their random parts), and knowing one
/// id says nothing about another.
///
/// ```swift
/// var random = SystemRandomNumberGenerator()
/// let id = VideoID.make(at: now, using: &random)   // "1700000000123-9f2c…"
/// ```
public struct VideoID: RawRepresentable, Hashable, Comparable, Codable, Sendable, ExpressibleByStringLiteral,
  CustomStringConvertible
{
  public let rawValue: String

  public init(rawValue: String) {
    self.rawValue = rawValue
  }

  public init(stringLiteral value: String) {
    self.rawValue = value
  }

  /// A new id for a video created at `time`, with 96 bits from `random`.
  public static func make(at time: Timestamp, using random: inout some RandomNumberGenerator) -> VideoID {
    let milliseconds = max(0, min(Int64(time.sinceEpoch / .milliseconds(1)), 9_999_999_999_999))
    let digits = String(milliseconds)
    let stamp = String(repeating: "0", count: 13 - digits.count) + digits
    let high = random.next()
    let low = UInt32(truncatingIfNeeded: random.next())
    return VideoID(rawValue: "\(stamp)-\(hex(high, width: 16))\(hex(UInt64(low), width: 8))")
  }

  private static func hex(_ value: UInt64, width: Int) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: width - digits.count) + digits
  }

  public static func < (lhs: VideoID, rhs: VideoID) -> Bool {
    lhs.rawValue < rhs.rawValue
  }

  public var description: String { rawValue }
}

/// Where a video's file is kept in blob storage.
public struct BlobKey: RawRepresentable, Hashable, Comparable, Codable, Sendable, ExpressibleByStringLiteral,
  CustomStringConvertible
{
  public let rawValue: String

  public init(rawValue: String) {
    self.rawValue = rawValue
  }

  public init(stringLiteral value: String) {
    self.rawValue = value
  }

  /// The key a sender uploads a video's file under.
  public static func forVideo(_ video: VideoID) -> BlobKey {
    BlobKey(rawValue: "videos/\(video.rawValue)")
  }

  public static func < (lhs: BlobKey, rhs: BlobKey) -> Bool {
    lhs.rawValue < rhs.rawValue
  }

  public var description: String { rawValue }
}

/// How far a video got, as its sender sees it. Farther wins; a status never goes back.
public enum VideoStatus: Int, Codable, Sendable, Hashable, Comparable, CustomStringConvertible {
  /// Recorded and on its way (shown from the outbox until the server confirms the upload).
  case sending = 0
  /// The file is in blob storage and the server tracks the video.
  case uploaded = 1
  /// The recipient has the file.
  case downloaded = 2
  /// The recipient watched it.
  case viewed = 3

  public static func < (lhs: VideoStatus, rhs: VideoStatus) -> Bool { lhs.rawValue < rhs.rawValue }

  public var description: String {
    switch self {
    case .sending: "sending"
    case .uploaded: "uploaded"
    case .downloaded: "downloaded"
    case .viewed: "viewed"
    }
  }
}
