import EventProtocol
import UpdateMachine

/// The client side of the episode queue: applies the server's events to the mirrored projection, and shows
/// pending commands optimistically.
///
/// It keeps exactly what the server's projection holds: the history trimmed to its limit, catalog fields
/// only for episodes in the queue or the history, catalog events for unknown episodes ignored, and an edit
/// applied only over a lower held version (so a late `v1` never overwrites `v2`).
public struct EpisodeReducer: UpdateReducer {
  /// The reducer.
  public init() {}

  /// A listener who has done nothing yet.
  public var initialState: EpisodeProjection { EpisodeProjection() }

  /// Applies one server event to the mirrored projection.
  public func apply(_ event: EpisodeEvent, to state: inout EpisodeProjection) throws(ReducerError) {
    switch event {
    case .favoriteChanged(let show, let isFavorite, let rev):
      state.favorites.removeAll { $0 == show }
      if isFavorite { state.favorites = (state.favorites + [show]).sorted() }
      state.rev = rev
    case .settingsChanged(let settings, let rev):
      state.settings = settings
      state.rev = rev
    case .fetched(let watermarks, let at, let added, let meta, let rev):
      state.watermarks.merge(watermarks) { _, new in new }
      state.lastFetchedAt = at
      for item in added { state.putInQueue(item) }
      state.meta.merge(meta) { _, new in new }
      state.rev = rev
    case .queued(let item, let meta, let refill, let refillMeta, let rev):
      state.history.removeAll { $0.episode == item.episode }
      if let refill {
        state.history.insert(refill, at: 0)
        state.meta[refill.episode] = refillMeta
      }
      state.putInQueue(item)
      state.meta[item.episode] = meta
      state.rev = rev
    case .moved(let episode, let key, let itemRev, let rev):
      guard var item = state.queued(episode) else { throw ReducerError("moved \(episode), which is not queued here") }
      item.key = key
      item.rev = itemRev
      state.putInQueue(item)
      state.rev = rev
    case .queueRekeyed(let keys, let rev):
      state.queue = state.queue.map { item in
        var item = item
        item.key = keys[item.episode] ?? item.key
        return item
      }
      .sorted { ($0.key, $0.episode) < ($1.key, $1.episode) }
      state.rev = rev
    case .terminal(let item, let meta, let rev):
      state.queue.removeAll { $0.episode == item.episode }
      state.putInHistory(item)
      state.meta[item.episode] = meta
      state.rev = rev
    case .positionChanged(let episode, let position, let itemRev, let rev):
      guard var item = state.queued(episode) else { throw ReducerError("position for \(episode), not queued here") }
      item.position = position
      item.rev = itemRev
      state.putInQueue(item)
      state.rev = rev
    case .episodeUpdated(let episode, let meta):
      guard let held = state.meta[episode], held.metaVersion < meta.metaVersion else { return }
      state.meta[episode] = meta
    case .availabilityChanged(let episode, let available, let metaVersion):
      guard var held = state.meta[episode], held.metaVersion < metaVersion else { return }
      held.available = available
      held.metaVersion = metaVersion
      state.meta[episode] = held
    }
    state.dropUnreferencedMeta()
  }

  /// What the screen shows before the server answers: a queued episode moves or appears, a finished or
  /// dismissed one leaves the queue, a position moves. Fetches, settings and favorites wait for the server.
  /// A position update replaces the unsent position updates of the same episode: the outbox keeps only the
  /// latest (the spec's `replaced` outcome).
  public func replaces(_ mutation: EpisodeCommand, unsent older: EpisodeCommand) -> Bool {
    guard case .updatePosition(let episode, _, _, _) = mutation, case .updatePosition(episode, _, _, _) = older
    else { return false }
    return true
  }

  public func applyOptimistically(_ command: EpisodeCommand, to state: inout EpisodeProjection) {
    switch command {
    case .markFinished(let episode, _), .dismiss(let episode, _):
      state.queue.removeAll { $0.episode == episode }
    case .move(let episode, let placement), .enqueue(let episode, let placement, _):
      guard var item = state.queued(episode) else { return }
      switch placement {
      case .top: item.key = (state.queue.first?.key ?? 0) - 1
      case .bottom: item.key = (state.queue.last?.key ?? 0) + 1
      case .after(let anchor): item.key = (state.queued(anchor)?.key ?? state.queue.last?.key ?? 0) + 1
      }
      state.putInQueue(item)
    case .updatePosition(let episode, let seconds, let at, let device):
      guard var item = state.queued(episode) else { return }
      item.position = Position(seconds: seconds, at: at, device: device)
      state.putInQueue(item)
    case .favorite, .unfavorite, .setSettings, .fetchNew, .admin:
      break
    }
  }
}
