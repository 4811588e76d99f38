import EventProtocol
import EventServer

/// The catalog (publish, edit, unpublish, scheduled publishing) and fetches.
extension EpisodeServer {
  mutating func handle(_ command: AdminCommand) throws(CommandRejection) -> [Delivery<EpisodeEvent>] {
    switch command {
    case .publish(let episode, var meta):
      if var entry = catalog[episode] {
        // A republish: visible again, with a fresh sequence number, for queued holders in place.
        guard !entry.meta.available || entry.visibleSeq == nil else { return supersede("\(episode) already published") }
        entry.meta.available = true
        entry.meta.metaVersion += 1
        entry.visibleSeq = nil
        catalog[episode] = entry
        reschedule(episode)
        let back = holderDeliveries(
          episode,
          .availabilityChanged(episode, available: true, metaVersion: entry.meta.metaVersion)
        )
        return back + makeVisibleIfDue(episode)
      }
      meta.metaVersion = 1
      meta.mediaVersion = 1
      meta.available = true
      catalog[episode] = CatalogEntry(meta: meta, visibleSeq: nil)
      reschedule(episode)
      return makeVisibleIfDue(episode)
    case .editMeta(let episode, let title, let url, let newMedia, let publishedAt):
      guard var entry = catalog[episode] else { throw CommandRejection("no episode \(episode)") }
      entry.meta.title = title
      entry.meta.url = url
      entry.meta.metaVersion += 1
      if newMedia { entry.meta.mediaVersion += 1 }
      if let publishedAt { entry.meta.publishedAt = publishedAt }
      catalog[episode] = entry
      reschedule(episode)
      // A scheduled episode moved to a date already past is published now.
      let published = entry.visibleSeq == nil && entry.meta.available ? makeVisibleIfDue(episode) : []
      return holderDeliveries(episode, .episodeUpdated(episode, entry.meta)) + published
    case .unpublish(let episode):
      guard var entry = catalog[episode] else { throw CommandRejection("no episode \(episode)") }
      guard entry.meta.available else { return supersede("\(episode) already unpublished") }
      entry.meta.available = false
      entry.meta.metaVersion += 1
      catalog[episode] = entry
      reschedule(episode)
      return holderDeliveries(
        episode,
        .availabilityChanged(episode, available: false, metaVersion: entry.meta.metaVersion)
      )
    case .publishDue:
      return []
    }
  }

  /// Every scheduled episode whose date has come becomes visible, oldest date first.
  /// - Complexity: O(1) when nothing is due.
  mutating func publishDue(now: Timestamp) -> [Delivery<EpisodeEvent>] {
    let due = schedule.prefix { $0.publishedAt <= now }.map(\.episode)
    return due.flatMap { makeVisibleIfDue($0) }
  }

  /// Puts `episode` in the schedule if it is available and not visible yet, at its date; else takes it
  /// out.
  mutating func reschedule(_ episode: EpisodeID) {
    schedule.removeAll { $0.episode == episode }
    guard let entry = catalog[episode], entry.meta.available, entry.visibleSeq == nil else { return }
    let slot = ScheduledEpisode(publishedAt: entry.meta.publishedAt, episode: episode)
    schedule.insert(slot, at: schedule.firstIndex { slot < $0 } ?? schedule.endIndex)
  }

  /// Makes `episode` visible when its date has come: a fresh sequence number, and favoriters with `autoAdd` fetching its show at once (no cron).
  private mutating func makeVisibleIfDue(_ episode: EpisodeID) -> [Delivery<EpisodeEvent>] {
    guard var entry = catalog[episode], entry.meta.publishedAt <= clock else { return [] }
    entry.visibleSeq = nextVisibleSeq
    nextVisibleSeq += 1
    catalog[episode] = entry
    reschedule(episode)
    var deliveries: [Delivery<EpisodeEvent>] = []
    let show = entry.meta.show
    for user in listeners.keys.sorted() {
      guard var listener = listeners[user], listener.settings.autoAdd, listener.favorites.contains(show) else {
        continue
      }
      deliveries += fetch(for: user, listener: &listener, shows: [show])
      listeners[user] = listener
    }
    return deliveries
  }

  /// `event` for every holder of `episode`.
  private func holderDeliveries(_ episode: EpisodeID, _ event: EpisodeEvent) -> [Delivery<EpisodeEvent>] {
    let recipients = (holders[episode] ?? []).sorted()
    return recipients.isEmpty ? [] : [Delivery(to: recipients, event: event)]
  }

  /// A fetch for `shows`: per show, the n newest visible episodes above the watermark with no record for
  /// the user, appended to the queue; the watermark moves to the show's highest sequence number even when
  /// nothing is added, and the event goes out regardless, so every device learns the fetch time.
  mutating func fetch(for user: UserID, listener: inout Listener, shows: [ShowID]) -> [Delivery<EpisodeEvent>] {
    var added: [QueueItem] = []
    var meta: [EpisodeID: EpisodeMeta] = [:]
    var watermarks: [ShowID: Int] = [:]
    listener.rev += 1
    var bottom = listener.bottom.map { $0.1.queueKey! } ?? 0
    for show in shows.sorted() {
      let mark = listener.watermarks[show] ?? 0
      let visible = catalog.filter { $0.value.meta.show == show && $0.value.isVisible }
      let candidates = visible.filter { $0.value.visibleSeq! > mark && listener.records[$0.key] == nil }
        .sorted { ($0.value.meta.publishedAt, $0.key) > ($1.value.meta.publishedAt, $1.key) }
        .prefix(listener.settings.n)
      for (episode, entry) in candidates {
        bottom += Self.keyStep
        let record = EpisodeRecord(state: .queued(key: bottom), position: nil, rev: listener.rev)
        listener.set(record, for: episode)
        addHolder(user, of: episode)
        added.append(record.queueItem(episode)!)
        meta[episode] = entry.meta
      }
      let highest = max(mark, visible.compactMap(\.value.visibleSeq).max() ?? 0)
      listener.watermarks[show] = highest
      watermarks[show] = highest
    }
    listener.lastFetchedAt = clock
    return [
      Delivery(
        to: [user],
        event: .fetched(watermarks: watermarks, at: clock, added: added, meta: meta, rev: listener.rev)
      )
    ]
  }
}
