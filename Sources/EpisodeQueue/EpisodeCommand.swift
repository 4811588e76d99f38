import EventProtocol

/// What a listener's device asks (through its outbox, applied at most once), or an admin does to the catalog.
///
/// A command that no longer makes sense when the server applies it (an `enqueue` whose basis predates a
/// terminal state, a position for a finished episode, a move of an episode no longer queued) is
/// *superseded*: accepted, applied as nothing, and it emits nothing.
public enum EpisodeCommand: Codable, Sendable, Equatable {
  /// Adds a show to the favorites (no fetch: that is `fetchNew`).
  case favorite(ShowID)
  /// Removes a show from the favorites; its watermark stays, so a re-favorite brings no burst.
  case unfavorite(ShowID)
  /// Replaces the settings (last writer wins, in server order).
  case setSettings(EpisodeSettings)
  /// Adds, per favorite show (or these of them), the n newest episodes made visible since the last fetch
  /// that the user has no record of.
  case fetchNew(shows: [ShowID]?)
  /// Queues an episode, or moves it if queued; restores a finished or dismissed one only when `basis` (the
  /// record revision the user saw) is at least its terminal revision.
  case enqueue(EpisodeID, Placement, basis: Int?)
  /// Moves a queued episode, resolved against the server's order when applied.
  case move(EpisodeID, Placement)
  /// The episode was played to the end: terminal, out of the queue.
  case markFinished(EpisodeID, at: Timestamp)
  /// The listener removed the episode unplayed: terminal, out of the queue.
  case dismiss(EpisodeID, at: Timestamp)
  /// Where playback is; accepted only if not older (by `at`, clamped to the server's clock) than the stored
  /// one (a tie goes to the later in server order). Only the latest unsent one per episode stays in the
  /// outbox (``EpisodeReducer/replaces(_:unsent:)``).
  case updatePosition(EpisodeID, seconds: Int, at: Timestamp, device: String)
  /// Catalog changes, from admin users only.
  case admin(AdminCommand)
}

/// What the broadcaster does to the catalog.
public enum AdminCommand: Codable, Sendable, Equatable {
  /// Publishes a new episode, or republishes an unpublished one (a fresh visibility sequence); one dated in
  /// the future becomes visible when the server's clock reaches its date.
  case publish(EpisodeID, EpisodeMeta)
  /// Edits the fields; `newMedia` when the audio changed; `publishedAt`, when given, moves the date: a
  /// scheduled episode becomes visible at the new date (at once if it has passed), a visible one only
  /// displays and ranks by it (it is never fetched again).
  case editMeta(EpisodeID, title: String, url: String, newMedia: Bool, publishedAt: Timestamp? = nil)
  /// Hides the episode everywhere; records stay, devices delete its file.
  case unpublish(EpisodeID)
  /// Scheduled episodes whose date has come become visible. The server does this on its own clock
  /// (``EpisodeServer/nextDeadline``); the command remains for hosts that drive time themselves.
  case publishDue
}
