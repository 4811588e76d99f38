import EventProtocol
import EventServer

/// The episode-queue server application: the catalog, each listener's records (queue, positions, finished
/// and dismissed tombstones), fetches, and the reverse index from episode to the listeners holding it.
///
/// The server owns each listener's state; devices mirror its projection (``EpisodeProjection``) through
/// the engine. Commands apply serially: a stale one is *superseded* (applied as nothing, no events).
/// The rules are in `docs/episode-queue.md`; the absorbing one is that a finished or dismissed episode
/// comes back only through an `enqueue` whose basis is at least its terminal revision.
///
/// ```swift
/// var server = EpisodeServer(admins: ["kpcc"])
/// _ = try server.handle(.admin(.publish("e1", meta)), from: "kpcc", at: now)
/// _ = try server.handle(.favorite("airtalk"), from: "alice", at: now)
/// _ = try server.handle(.fetchNew(shows: nil), from: "alice", at: now)   // e1 queued for alice
/// ```
public struct EpisodeServer: ServerApplication, Codable, Equatable {
  public typealias Snapshot = EpisodeProjection
  public typealias Event = EpisodeEvent
  public typealias Command = EpisodeCommand

  /// Who may change the catalog.
  public let admins: Set<UserID>
  var catalog: [EpisodeID: CatalogEntry] = [:]
  var nextVisibleSeq = 1
  var listeners: [UserID: Listener] = [:]
  /// Who holds a record of each episode: the recipients of its catalog events.
  var holders: [EpisodeID: Set<UserID>] = [:]
  /// The server time of the last command (what the timeless entry point uses).
  var clock = Timestamp(secondsSinceEpoch: 0)
  /// What was superseded lately (for tests and operators), newest last, at most 100.
  public private(set) var superseded: [String] = []
  /// The latest terminal → queued transitions (at most ``restorationAuditLimit``), with their basis and
  /// the terminal revision they overrode: an audit the tests check (never a basis below the terminal
  /// revision), bounded so it does not grow with every "play again" for ever.
  public private(set) var restorations: [Restoration] = []
  /// How many restorations the audit keeps.
  public static let restorationAuditLimit = 1_000
  /// The scheduled episodes (available, not yet visible), by date then id: what ``nextDeadline`` reads
  /// (derived from the catalog).
  var schedule: [ScheduledEpisode] = []

  /// A scheduled episode in ``schedule``.
  struct ScheduledEpisode: Comparable, Sendable, Equatable {
    var publishedAt: Timestamp
    var episode: EpisodeID
    static func < (lhs: Self, rhs: Self) -> Bool {
      (lhs.publishedAt, lhs.episode) < (rhs.publishedAt, rhs.episode)
    }
  }

  private enum CodingKeys: String, CodingKey {
    case admins, catalog, nextVisibleSeq, listeners, holders, clock, superseded, restorations
  }

  /// A restore of a finished or dismissed episode.
  public struct Restoration: Codable, Sendable, Hashable {
    /// Whose queue the episode came back to.
    public var user: UserID
    /// The episode restored.
    public var episode: EpisodeID
    /// The revision of the entry the `enqueue` was based on.
    public var basis: Int
    /// The revision at which the episode had been finished or dismissed (never above `basis`).
    public var terminalRev: Int
  }

  /// An empty catalog; `admins` may publish, edit and unpublish.
  public init(admins: Set<UserID> = ["admin"]) {
    self.admins = admins
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    admins = try container.decode(Set<UserID>.self, forKey: .admins)
    catalog = try container.decode([EpisodeID: CatalogEntry].self, forKey: .catalog)
    nextVisibleSeq = try container.decode(Int.self, forKey: .nextVisibleSeq)
    listeners = try container.decode([UserID: Listener].self, forKey: .listeners)
    holders = try container.decode([EpisodeID: Set<UserID>].self, forKey: .holders)
    clock = try container.decode(Timestamp.self, forKey: .clock)
    superseded = try container.decode([String].self, forKey: .superseded)
    restorations = try container.decode([Restoration].self, forKey: .restorations)
    for episode in catalog.keys { reschedule(episode) }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(admins, forKey: .admins)
    try container.encode(catalog, forKey: .catalog)
    try container.encode(nextVisibleSeq, forKey: .nextVisibleSeq)
    try container.encode(listeners, forKey: .listeners)
    try container.encode(holders, forKey: .holders)
    try container.encode(clock, forKey: .clock)
    try container.encode(superseded, forKey: .superseded)
    try container.encode(restorations, forKey: .restorations)
  }

  // MARK: - The server's own clock

  /// When the next scheduled episode's date comes; the server then publishes it with no command.
  /// - Complexity: O(1).
  public var nextDeadline: Timestamp? { schedule.first?.publishedAt }

  /// Scheduled episodes whose date has come become visible (and are fetched for `autoAdd` favoriters).
  public mutating func deadlineReached(at now: Timestamp) -> [Delivery<EpisodeEvent>] {
    clock = max(clock, now)
    return publishDue(now: clock)
  }

  // MARK: - Reading

  /// The projection P(u) of `user`: what a registration hands a device.
  public func snapshot(for user: UserID) -> EpisodeProjection {
    let listener = listeners[user] ?? Listener()
    var projection = EpisodeProjection()
    projection.rev = listener.rev
    projection.favorites = listener.favorites
    projection.settings = listener.settings
    projection.watermarks = listener.watermarks
    projection.lastFetchedAt = listener.lastFetchedAt
    projection.queue = listener.queue.compactMap { $0.1.queueItem($0.0) }
    projection.history = listener.terminals(last: EpisodeProjection.historyLimit).compactMap { $0.1.historyItem($0.0) }
    for episode in projection.queue.map(\.episode) + projection.history.map(\.episode) {
      projection.meta[episode] = catalog[episode]?.meta
    }
    return projection
  }

  /// The catalog fields of an episode, if it exists.
  public func meta(of episode: EpisodeID) -> EpisodeMeta? { catalog[episode]?.meta }

  /// Every episode in the catalog, sorted (published, scheduled or unpublished).
  public var catalogIDs: [EpisodeID] { catalog.keys.sorted() }

  // MARK: - Commands

  public mutating func handle(
    _ command: EpisodeCommand,
    from user: UserID
  ) throws(CommandRejection)
    -> [Delivery<EpisodeEvent>]
  {
    try handle(command, from: user, at: clock)
  }

  public mutating func handle(
    _ command: EpisodeCommand,
    from user: UserID,
    at now: Timestamp
  ) throws(CommandRejection) -> [Delivery<EpisodeEvent>] {
    try validate(command, from: user)
    clock = max(clock, now)
    // Scheduled episodes whose date has come become visible first, whatever the command.
    var deliveries = publishDue(now: clock)
    switch command {
    case .admin(let admin): deliveries += try handle(admin)
    default: deliveries += listenerCommand(command, from: user)
    }
    return deliveries
  }

  /// Refuses what no state makes valid, before anything changes.
  private func validate(_ command: EpisodeCommand, from user: UserID) throws(CommandRejection) {
    switch command {
    case .admin:
      guard admins.contains(user) else { throw CommandRejection("\(user) may not change the catalog") }
    case .setSettings(let settings):
      guard (1...50).contains(settings.n) else { throw CommandRejection("n must be 1 to 50") }
    case .enqueue(let episode, _, _), .move(let episode, _), .markFinished(let episode, _), .dismiss(let episode, _):
      guard catalog[episode] != nil else { throw CommandRejection("no episode \(episode)") }
    case .updatePosition(let episode, let seconds, _, let device):
      guard catalog[episode] != nil else { throw CommandRejection("no episode \(episode)") }
      guard seconds >= 0, device.utf8.count <= 64 else { throw CommandRejection("a position is 0 s or more") }
    case .favorite, .unfavorite, .fetchNew:
      break
    }
  }

  mutating func supersede(_ reason: String) -> [Delivery<EpisodeEvent>] {
    superseded.append(reason)
    if superseded.count > 100 { superseded.removeFirst() }
    return []
  }

  mutating func noteRestoration(_ restoration: Restoration) {
    restorations.append(restoration)
    if restorations.count > Self.restorationAuditLimit { restorations.removeFirst() }
  }

  /// Remembers that `user` holds a record of `episode`.
  mutating func addHolder(_ user: UserID, of episode: EpisodeID) {
    holders[episode, default: []].insert(user)
  }
}
