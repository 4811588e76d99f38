import EventProtocol

/// One listener's state on the server: the truth their devices mirror.
///
/// Records are never deleted (finished and dismissed ones are tombstones), so the queue and the history are
/// kept as ordered indexes, updated as records change: reading the queue costs its length, and the recent
/// history its window, never the listener's whole past.
struct Listener: Codable, Sendable, Equatable {
  var rev = 0
  var favorites: [ShowID] = []
  var settings = EpisodeSettings()
  var watermarks: [ShowID: Int] = [:]
  var lastFetchedAt: Timestamp?
  /// Every record; change them through ``set(_:for:)``, which keeps the indexes.
  private(set) var records: [EpisodeID: EpisodeRecord] = [:]
  /// The queued records' (key, episode), in queue order (derived).
  private var queueOrder: [QueueSlot] = []
  /// The terminal records' (terminal revision, episode), oldest first (derived).
  private var terminalOrder: [TerminalSlot] = []

  private struct QueueSlot: Comparable, Sendable, Equatable {
    var key: Int64
    var episode: EpisodeID
    static func < (lhs: Self, rhs: Self) -> Bool { (lhs.key, lhs.episode) < (rhs.key, rhs.episode) }
  }

  private struct TerminalSlot: Comparable, Sendable, Equatable {
    var rev: Int
    var episode: EpisodeID
    static func < (lhs: Self, rhs: Self) -> Bool { (lhs.rev, lhs.episode) < (rhs.rev, rhs.episode) }
  }

  private enum CodingKeys: String, CodingKey {
    case rev, favorites, settings, watermarks, lastFetchedAt, records
  }

  init() {}

  init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    rev = try container.decode(Int.self, forKey: .rev)
    favorites = try container.decode([ShowID].self, forKey: .favorites)
    settings = try container.decode(EpisodeSettings.self, forKey: .settings)
    watermarks = try container.decode([ShowID: Int].self, forKey: .watermarks)
    lastFetchedAt = try container.decodeIfPresent(Timestamp.self, forKey: .lastFetchedAt)
    for (episode, record) in try container.decode([EpisodeID: EpisodeRecord].self, forKey: .records) {
      set(record, for: episode)
    }
  }

  /// Replaces (or removes) `episode`'s record, keeping the queue and history indexes in order.
  /// - Complexity: O(log *n*) to find, O(*n*) to move in the worst case (an array insertion).
  mutating func set(_ record: EpisodeRecord?, for episode: EpisodeID) {
    if let old = records[episode] {
      if let key = old.queueKey { Self.remove(QueueSlot(key: key, episode: episode), from: &queueOrder) }
      if let slot = Self.terminalSlot(old, episode) { Self.remove(slot, from: &terminalOrder) }
    }
    records[episode] = record
    guard let record else { return }
    if let key = record.queueKey { Self.insert(QueueSlot(key: key, episode: episode), into: &queueOrder) }
    if let slot = Self.terminalSlot(record, episode) { Self.insert(slot, into: &terminalOrder) }
  }

  /// The records in the queue, in order.
  /// - Complexity: O(*q*) in the queue's length.
  var queue: [(EpisodeID, EpisodeRecord)] { queueOrder.map { ($0.episode, records[$0.episode]!) } }

  /// The last queued record (the bottom of the queue).
  var bottom: (EpisodeID, EpisodeRecord)? { queueOrder.last.map { ($0.episode, records[$0.episode]!) } }

  /// The `count` most recent terminal records, oldest first by terminal revision.
  /// - Complexity: O(`count`).
  func terminals(last count: Int) -> [(EpisodeID, EpisodeRecord)] {
    terminalOrder.suffix(count).map { ($0.episode, records[$0.episode]!) }
  }

  private static func terminalSlot(_ record: EpisodeRecord, _ episode: EpisodeID) -> TerminalSlot? {
    guard record.queueKey == nil, let rev = record.terminalRev else { return nil }
    return TerminalSlot(rev: rev, episode: episode)
  }

  private static func insertionIndex<Slot: Comparable>(of slot: Slot, in slots: [Slot]) -> Int {
    var low = 0
    var high = slots.count
    while low < high {
      let middle = (low + high) / 2
      if slots[middle] < slot { low = middle + 1 } else { high = middle }
    }
    return low
  }

  private static func insert<Slot: Comparable>(_ slot: Slot, into slots: inout [Slot]) {
    slots.insert(slot, at: insertionIndex(of: slot, in: slots))
  }

  private static func remove<Slot: Comparable>(_ slot: Slot, from slots: inout [Slot]) {
    let index = insertionIndex(of: slot, in: slots)
    if index < slots.count, slots[index] == slot { slots.remove(at: index) }
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
