import EventProtocol

/// One listener's state on the server: the truth their devices mirror.
struct Listener: Codable, Sendable, Equatable {
  var rev = 0
  var favorites: [ShowID] = []
  var settings = EpisodeSettings()
  var watermarks: [ShowID: Int] = [:]
  var lastFetchedAt: Timestamp?
  var records: [EpisodeID: EpisodeRecord] = [:]

  /// The records in the queue, in order.
  var queue: [(EpisodeID, EpisodeRecord)] {
    records.filter { $0.value.queueKey != nil }.sorted { ($0.value.queueKey!, $0.key) < ($1.value.queueKey!, $1.key) }
  }

  /// The terminal records, oldest first by terminal revision.
  var terminals: [(EpisodeID, EpisodeRecord)] {
    records.filter { $0.value.terminalRev != nil && $0.value.queueKey == nil }
      .sorted { ($0.value.terminalRev!, $0.key) < ($1.value.terminalRev!, $1.key) }
  }
}

/// A user's record of one episode. Records are never deleted: finished and dismissed ones are tombstones.
struct EpisodeRecord: Codable, Sendable, Equatable {
  enum State: Codable, Sendable, Equatable {
    case queued(key: Int64)
    case finished(at: Timestamp)
    case dismissed(at: Timestamp)
  }

  var state: State
  var position: Position?
  /// The user revision of the record's last change.
  var rev: Int
  /// The user revision at which it last became terminal.
  var terminalRev: Int?
  /// Its key when it last left the queue.
  var lastKey: Int64?

  var queueKey: Int64? {
    if case .queued(let key) = state { return key }
    return nil
  }

  var isTerminal: Bool { queueKey == nil }

  func queueItem(_ episode: EpisodeID) -> QueueItem? {
    queueKey.map { QueueItem(episode: episode, key: $0, position: position, rev: rev) }
  }

  func historyItem(_ episode: EpisodeID) -> HistoryItem? {
    switch state {
    case .queued: nil
    case .finished(let at): HistoryItem(episode: episode, finished: true, at: at, terminalRev: terminalRev ?? rev)
    case .dismissed(let at): HistoryItem(episode: episode, finished: false, at: at, terminalRev: terminalRev ?? rev)
    }
  }
}

/// An episode in the catalog, with what only the server knows.
struct CatalogEntry: Codable, Sendable, Equatable {
  var meta: EpisodeMeta
  /// Assigned from the global counter each time the episode becomes visible; `nil` while scheduled.
  var visibleSeq: Int?

  var isVisible: Bool { meta.available && visibleSeq != nil }
}
