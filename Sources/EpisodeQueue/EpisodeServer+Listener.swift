import EventProtocol
import EventServer

/// A listener's own commands: favorites, settings, the queue, positions, finished and dismissed.
extension EpisodeServer {
  /// The spacing of fresh queue keys.
  static let keyStep: Int64 = 1 << 20

  mutating func listenerCommand(_ command: EpisodeCommand, from user: UserID) -> [Delivery<EpisodeEvent>] {
    var listener = listeners[user] ?? Listener()
    defer { listeners[user] = listener }
    switch command {
    case .favorite(let show):
      guard !listener.favorites.contains(show) else { return supersede("\(user): \(show) already a favorite") }
      listener.favorites = (listener.favorites + [show]).sorted()
      listener.rev += 1
      return [Delivery(to: [user], event: .favoriteChanged(show, isFavorite: true, rev: listener.rev))]
    case .unfavorite(let show):
      guard listener.favorites.contains(show) else { return supersede("\(user): \(show) not a favorite") }
      listener.favorites.removeAll { $0 == show }
      listener.rev += 1
      return [Delivery(to: [user], event: .favoriteChanged(show, isFavorite: false, rev: listener.rev))]
    case .setSettings(let settings):
      guard settings != listener.settings else { return supersede("\(user): settings unchanged") }
      listener.settings = settings
      listener.rev += 1
      return [Delivery(to: [user], event: .settingsChanged(settings, rev: listener.rev))]
    case .fetchNew(let shows):
      let wanted = shows.map { Set($0) } ?? Set(listener.favorites)
      return fetch(for: user, listener: &listener, shows: listener.favorites.filter(wanted.contains))
    case .enqueue(let episode, let placement, let basis):
      return enqueue(episode, placement, basis: basis, user: user, listener: &listener)
    case .move(let episode, let placement):
      guard let record = listener.records[episode], !record.isTerminal else {
        return supersede("\(user): move of \(episode), not queued")
      }
      return place(episode, placement, record: record, user: user, listener: &listener)
    case .markFinished(let episode, let at):
      return makeTerminal(episode, finished: true, at: at, user: user, listener: &listener)
    case .dismiss(let episode, let at):
      return makeTerminal(episode, finished: false, at: at, user: user, listener: &listener)
    case .updatePosition(let episode, let seconds, let at, let device):
      // Never creates or revives a record; a client clock ahead of the server's is clamped to it.
      guard var record = listener.records[episode], !record.isTerminal else {
        return supersede("\(user): position of \(episode), not queued")
      }
      let clamped = min(at, clock)
      // Ties go to server order: the later update wins. A restart ("play again") is itself a position at
      // the restart's time, so an older one sent late from an offline device never undoes it.
      if let current = record.position, clamped < current.at {
        return supersede("\(user): position of \(episode) from \(clamped), older than \(current.at)")
      }
      listener.rev += 1
      record.position = Position(seconds: seconds, at: clamped, device: device)
      record.rev = listener.rev
      listener.set(record, for: episode)
      return [
        Delivery(
          to: [user],
          event: .positionChanged(episode, record.position!, itemRev: record.rev, rev: listener.rev)
        )
      ]
    case .admin:
      return []
    }
  }

  private mutating func enqueue(
    _ episode: EpisodeID,
    _ placement: Placement,
    basis: Int?,
    user: UserID,
    listener: inout Listener
  ) -> [Delivery<EpisodeEvent>] {
    guard let entry = catalog[episode], entry.meta.available else {
      return supersede("\(user): enqueue of \(episode), not available")
    }
    if let record = listener.records[episode], !record.isTerminal {
      return place(episode, placement, record: record, user: user, listener: &listener)
    }
    var deliveries: [Delivery<EpisodeEvent>] = []
    var refill: (HistoryItem, EpisodeMeta)?
    var record: EpisodeRecord
    if let existing = listener.records[episode] {
      // Terminal states absorb: only a user who saw this state (basis ≥ terminal revision) overrides it.
      let terminalRev = existing.terminalRev ?? existing.rev
      guard let basis, basis >= terminalRev else {
        return supersede(
          "\(user): enqueue of \(episode) with basis \(basis.map(String.init) ?? "none") < \(terminalRev)"
        )
      }
      noteRestoration(Restoration(user: user, episode: episode, basis: basis, terminalRev: terminalRev))
      // Leaving the history window lets the next older tombstone in.
      let window = listener.terminals(last: EpisodeProjection.historyLimit + 1)
      if window.count > EpisodeProjection.historyLimit,
        window.suffix(EpisodeProjection.historyLimit).contains(where: { $0.0 == episode }),
        let (older, olderRecord) = window.first, let item = olderRecord.historyItem(older),
        let meta = catalog[older]?.meta
      {
        refill = (item, meta)
      }
      record = existing
      if case .finished = existing.state {
        record.position = Position(seconds: 0, at: clock, device: Position.restartDevice)
      }
    } else {
      record = EpisodeRecord(state: .queued(key: 0), position: nil, rev: 0)
      addHolder(user, of: episode)
    }
    let (key, rekeyed) = key(for: placement, excluding: episode, listener: &listener)
    if let rekeyed {
      listener.rev += 1
      deliveries.append(Delivery(to: [user], event: .queueRekeyed(rekeyed, rev: listener.rev)))
    }
    listener.rev += 1
    record.state = .queued(key: key)
    record.rev = listener.rev
    listener.set(record, for: episode)
    deliveries.append(
      Delivery(
        to: [user],
        event: .queued(
          record.queueItem(episode)!,
          entry.meta,
          refill: refill?.0,
          refillMeta: refill?.1,
          rev: listener.rev
        )
      )
    )
    return deliveries
  }

  /// Moves a queued episode.
  private mutating func place(
    _ episode: EpisodeID,
    _ placement: Placement,
    record: EpisodeRecord,
    user: UserID,
    listener: inout Listener
  ) -> [Delivery<EpisodeEvent>] {
    var deliveries: [Delivery<EpisodeEvent>] = []
    let (key, rekeyed) = key(for: placement, excluding: episode, listener: &listener)
    if let rekeyed {
      listener.rev += 1
      deliveries.append(Delivery(to: [user], event: .queueRekeyed(rekeyed, rev: listener.rev)))
    }
    var record = listener.records[episode] ?? record
    listener.rev += 1
    record.state = .queued(key: key)
    record.rev = listener.rev
    listener.set(record, for: episode)
    deliveries.append(Delivery(to: [user], event: .moved(episode, key: key, itemRev: record.rev, rev: listener.rev)))
    return deliveries
  }

  private mutating func makeTerminal(
    _ episode: EpisodeID,
    finished: Bool,
    at: Timestamp,
    user: UserID,
    listener: inout Listener
  ) -> [Delivery<EpisodeEvent>] {
    var record = listener.records[episode] ?? EpisodeRecord(state: .dismissed(at: at), position: nil, rev: 0)
    switch record.state {
    case .finished:
      return supersede("\(user): \(episode) already finished")
    case .dismissed where !finished:
      return supersede("\(user): \(episode) already dismissed")
    case .dismissed, .queued:
      // Finished wins over dismissed; both take the episode out of the queue.
      break
    }
    if listener.records[episode] == nil { addHolder(user, of: episode) }
    if let key = record.queueKey { record.lastKey = key }
    listener.rev += 1
    record.state = finished ? .finished(at: min(at, clock)) : .dismissed(at: min(at, clock))
    record.rev = listener.rev
    record.terminalRev = listener.rev
    listener.set(record, for: episode)
    guard let meta = catalog[episode]?.meta else { return [] }
    return [Delivery(to: [user], event: .terminal(record.historyItem(episode)!, meta, rev: listener.rev))]
  }

  /// The key for `placement`, renumbering the whole queue (returned) when there is no room.
  private func key(
    for placement: Placement,
    excluding episode: EpisodeID,
    listener: inout Listener
  ) -> (Int64, [EpisodeID: Int64]?) {
    let others = listener.queue.filter { $0.0 != episode }
    func attempt(_ others: [(EpisodeID, EpisodeRecord)]) -> Int64? {
      let keys = others.map { $0.1.queueKey! }
      switch placement {
      case .top: return (keys.first ?? Self.keyStep) - Self.keyStep
      case .bottom: return (keys.last ?? 0) + Self.keyStep
      case .after(let anchor):
        let anchorKey: Int64? =
          listener.records[anchor].flatMap { $0.queueKey ?? $0.lastKey }
        guard let anchorKey else { return (keys.last ?? 0) + Self.keyStep }
        let next = keys.first { $0 > anchorKey }
        guard let next else { return anchorKey + Self.keyStep }
        // Right after the anchor: strictly between it and the next key, else there is no room.
        return next - anchorKey >= 2 ? anchorKey + (next - anchorKey) / 2 : nil
      }
    }
    if let key = attempt(others) { return (key, nil) }
    var renumbered: [EpisodeID: Int64] = [:]
    for (index, (id, record)) in listener.queue.enumerated() {
      let key = Int64(index + 1) * Self.keyStep
      renumbered[id] = key
      var changed = record
      if let old = changed.lastKey, old == record.queueKey { changed.lastKey = key }
      changed.state = .queued(key: key)
      listener.set(changed, for: id)
    }
    // Keys left behind by episodes that left the queue keep their relative place only roughly; an
    // `after` such an episode then lands near where it was.
    return (attempt(listener.queue.filter { $0.0 != episode }) ?? Self.keyStep / 2, renumbered)
  }
}
