import EventProtocol

/// What the server tells a listener's devices. Events about the user's own state carry the user's new
/// revision; catalog events go to every holder of the episode.
public enum EpisodeEvent: EventPayload, Hashable {
  /// A show joined or left the favorites.
  case favoriteChanged(ShowID, isFavorite: Bool, rev: Int)
  /// The settings changed.
  case settingsChanged(EpisodeSettings, rev: Int)
  /// A fetch ran: the watermarks it moved, when, and the episodes it added (with their fields).
  case fetched(watermarks: [ShowID: Int], at: Timestamp, added: [QueueItem], meta: [EpisodeID: EpisodeMeta], rev: Int)
  /// An episode entered the queue (new, or restored from the history). A restore takes it out of the
  /// trimmed history, so the next older terminal record enters it (`refill`, with its fields).
  case queued(QueueItem, EpisodeMeta, refill: HistoryItem?, refillMeta: EpisodeMeta?, rev: Int)
  /// A queued episode got a new key.
  case moved(EpisodeID, key: Int64, itemRev: Int, rev: Int)
  /// Every key, renumbered (when a placement found no room between two keys).
  case queueRekeyed([EpisodeID: Int64], rev: Int)
  /// An episode became finished or dismissed (leaving the queue if it was there).
  case terminal(HistoryItem, EpisodeMeta, rev: Int)
  /// A queued episode's position was accepted.
  case positionChanged(EpisodeID, Position, itemRev: Int, rev: Int)
  /// Catalog: an episode's fields changed (for holders).
  case episodeUpdated(EpisodeID, EpisodeMeta)
  /// Catalog: an episode was unpublished or republished (for holders).
  case availabilityChanged(EpisodeID, available: Bool, metaVersion: Int)

  /// The wire types of the events.
  public static let knownEventTypes: Set<String> = [
    "favorite_changed", "settings_changed", "fetched", "queued", "moved", "queue_rekeyed", "terminal",
    "position_changed", "episode_updated", "availability_changed",
  ]

  /// The wire type of this event.
  public var eventType: String {
    switch self {
    case .favoriteChanged: "favorite_changed"
    case .settingsChanged: "settings_changed"
    case .fetched: "fetched"
    case .queued: "queued"
    case .moved: "moved"
    case .queueRekeyed: "queue_rekeyed"
    case .terminal: "terminal"
    case .positionChanged: "position_changed"
    case .episodeUpdated: "episode_updated"
    case .availabilityChanged: "availability_changed"
    }
  }
}
