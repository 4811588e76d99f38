import EventProtocol

/// What a listener's devices mirror: the server's projection P(u) of the user's state (the snapshot), and
/// the reducer's state.
///
/// The queue in order, the last ``historyLimit`` finished or dismissed episodes, and the catalog fields of
/// exactly those episodes. Tombstones older than the history stay on the server, which alone decides what a
/// fetch adds, so devices never need them.
public struct EpisodeProjection: Codable, Sendable, Equatable {
  /// How many terminal records the projection keeps (by terminal revision).
  public static let historyLimit = 200

  /// +1 per change the user's commands made.
  public var rev = 0
  /// The favorite shows, sorted.
  public var favorites: [ShowID] = []
  /// `n` and `autoAdd`.
  public var settings = EpisodeSettings()
  /// Per show, the highest visibility sequence number a fetch has seen.
  public var watermarks: [ShowID: Int] = [:]
  /// When the last fetch ran (on any device).
  public var lastFetchedAt: Timestamp?
  /// The queue, sorted by (key, episode).
  public var queue: [QueueItem] = []
  /// The last terminal records, oldest first (by terminal revision).
  public var history: [HistoryItem] = []
  /// The catalog fields of the episodes in the queue and the history, and no others.
  public var meta: [EpisodeID: EpisodeMeta] = [:]

  /// An empty projection: a listener who has done nothing yet.
  public init() {}

  /// The queue item of `episode`, if it is queued.
  public func queued(_ episode: EpisodeID) -> QueueItem? { queue.first { $0.episode == episode } }

  /// The history item of `episode`, if it is in the trimmed history.
  public func terminal(_ episode: EpisodeID) -> HistoryItem? { history.first { $0.episode == episode } }

  /// Inserts or replaces a queue item, keeping the order.
  mutating func putInQueue(_ item: QueueItem) {
    queue.removeAll { $0.episode == item.episode }
    let index = queue.firstIndex { ($0.key, $0.episode) > (item.key, item.episode) } ?? queue.endIndex
    queue.insert(item, at: index)
  }

  /// Appends a terminal record and trims the history to its limit.
  mutating func putInHistory(_ item: HistoryItem) {
    history.removeAll { $0.episode == item.episode }
    let index = history.firstIndex { $0.terminalRev > item.terminalRev } ?? history.endIndex
    history.insert(item, at: index)
    if history.count > Self.historyLimit { history.removeFirst(history.count - Self.historyLimit) }
  }

  /// Drops the catalog fields of episodes neither queued nor in the history.
  mutating func dropUnreferencedMeta() {
    let referenced = Set(queue.map(\.episode)).union(history.map(\.episode))
    meta = meta.filter { referenced.contains($0.key) }
  }
}
