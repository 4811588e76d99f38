import EventProtocol

/// A podcast episode's stable id (the catalog's, never the feed's GUID or enclosure URL).
public struct EpisodeID: RawRepresentable, Hashable, Comparable, Codable, Sendable, ExpressibleByStringLiteral,
  CustomStringConvertible
{
  /// The id as text.
  public let rawValue: String
  /// An id from its text.
  public init(rawValue: String) { self.rawValue = rawValue }
  /// An id written as a literal.
  public init(stringLiteral value: String) { self.rawValue = value }
  public static func < (lhs: EpisodeID, rhs: EpisodeID) -> Bool { lhs.rawValue < rhs.rawValue }
  public var description: String { rawValue }
}

/// A show's id.
public struct ShowID: RawRepresentable, Hashable, Comparable, Codable, Sendable, ExpressibleByStringLiteral,
  CustomStringConvertible
{
  /// The id as text.
  public let rawValue: String
  /// An id from its text.
  public init(rawValue: String) { self.rawValue = rawValue }
  /// An id written as a literal.
  public init(stringLiteral value: String) { self.rawValue = value }
  public static func < (lhs: ShowID, rhs: ShowID) -> Bool { lhs.rawValue < rhs.rawValue }
  public var description: String { rawValue }
}

/// What a listener sees of an episode: the broadcaster's fields and their versions.
public struct EpisodeMeta: Codable, Sendable, Hashable {
  /// The show it belongs to.
  public var show: ShowID
  /// Its title.
  public var title: String
  /// Where its audio is.
  public var url: String
  /// Its date: displayed and used to rank within a fetch, never as a fetch cursor.
  public var publishedAt: Timestamp
  /// Its length in seconds.
  public var duration: Int
  /// Rises on every edit.
  public var metaVersion: Int
  /// Rises only when the audio changes (a device replaces its file then).
  public var mediaVersion: Int
  /// False once unpublished (devices stop playing it and delete its file).
  public var available: Bool

  /// Creates the fields of an episode (versions start at 1; the server sets them on publish).
  public init(
    show: ShowID,
    title: String,
    url: String,
    publishedAt: Timestamp,
    duration: Int = 1_800,
    metaVersion: Int = 1,
    mediaVersion: Int = 1,
    available: Bool = true
  ) {
    self.show = show
    self.title = title
    self.url = url
    self.publishedAt = publishedAt
    self.duration = duration
    self.metaVersion = metaVersion
    self.mediaVersion = mediaVersion
    self.available = available
  }
}

/// A listening position: where, when (clamped to the server's clock), and on which device.
public struct Position: Codable, Sendable, Hashable {
  /// Seconds from the start.
  public var seconds: Int
  /// When it was reached (clamped to the server's clock).
  public var at: Timestamp
  /// Which device reported it.
  public var device: String

  /// The device name of the position a restart ("play again" of a finished episode) sets: 0 s at the
  /// restart's server time, superseding every older position.
  public static let restartDevice = ""

  /// Creates a position.
  public init(seconds: Int, at: Timestamp, device: String) {
    self.seconds = seconds
    self.at = at
    self.device = device
  }
}

/// Where an enqueued or moved episode goes.
public enum Placement: Codable, Sendable, Hashable {
  /// At the head of the queue.
  case top
  /// At the end of the queue.
  case bottom
  /// Right after another episode (at its last key if it has left the queue; the bottom if unknown).
  case after(EpisodeID)
}

/// The listener's settings: how many episodes per show a fetch adds, and whether publishing adds them.
public struct EpisodeSettings: Codable, Sendable, Hashable {
  /// 1…50.
  public var n: Int
  /// Whether a new episode of a favorite show is added when published (no fetch needed).
  public var autoAdd: Bool

  /// Creates settings.
  public init(n: Int = 5, autoAdd: Bool = false) {
    self.n = n
    self.autoAdd = autoAdd
  }
}

/// One episode in the queue, as a device mirrors it.
public struct QueueItem: Codable, Sendable, Hashable {
  /// The episode.
  public var episode: EpisodeID
  /// Server-assigned order key; the queue is sorted by (key, episode).
  public var key: Int64
  /// Where playback is, if started.
  public var position: Position?
  /// The record's revision: what an `enqueue` after a terminal state quotes as its basis.
  public var rev: Int

  /// Creates a queue item.
  public init(episode: EpisodeID, key: Int64, position: Position?, rev: Int) {
    self.episode = episode
    self.key = key
    self.position = position
    self.rev = rev
  }
}

/// A finished or dismissed episode, as the trimmed history shows it.
public struct HistoryItem: Codable, Sendable, Hashable {
  /// The episode.
  public var episode: EpisodeID
  /// Finished (played to the end) rather than dismissed (removed unplayed).
  public var finished: Bool
  /// When it became terminal (clamped to the server's clock).
  public var at: Timestamp
  /// The user revision at which the record became terminal: an `enqueue` needs a basis at least this.
  public var terminalRev: Int

  /// Creates a history item.
  public init(episode: EpisodeID, finished: Bool, at: Timestamp, terminalRev: Int) {
    self.episode = episode
    self.finished = finished
    self.at = at
    self.terminalRev = terminalRev
  }
}
