import EpisodeQueue
import EventProtocol
import EventServer
import Foundation
import UpdateMachine

extension SimulationWorld where Domain == EpisodeDomain {
  // MARK: - What people do

  /// A listener does one thing with the queue: favourites, settings, new episodes, enqueueing (with a
  /// current or a stale basis), moving, finishing, dismissing, or a playback position from a clock that may
  /// be off by minutes.
  mutating func listenerActs(_ index: Int) {
    let shown = devices[index].displayedState ?? EpisodeProjection()
    let known = Array(server.application.catalogIDs.prefix(40))
    guard
      let episode = (shown.queue.map(\.episode) + shown.history.map(\.episode) + known).randomElement(
        using: &domain.random
      )
    else { return }
    let show = EpisodeDomain.shows.randomElement(using: &domain.random)!
    let placement: Placement = [
      .top, .bottom, .after(shown.queue.randomElement(using: &domain.random)?.episode ?? episode),
    ]
    .randomElement(using: &domain.random)!
    let command: EpisodeCommand
    switch Int.random(in: 0..<12, using: &domain.random) {
    case 0: command = .favorite(show)
    case 1: command = .unfavorite(show)
    case 2:
      command = .setSettings(
        EpisodeSettings(n: Int.random(in: 1...4, using: &domain.random), autoAdd: Bool.random(using: &domain.random))
      )
    case 3, 4: command = .fetchNew(shows: nil)
    case 5: command = .enqueue(episode, placement, basis: shown.terminal(episode)?.terminalRev)
    case 6: command = .enqueue(episode, placement, basis: (shown.terminal(episode)?.terminalRev ?? 1) - 1)
    case 7: command = .move(episode, placement)
    case 8: command = .markFinished(episode, at: now)
    case 9: command = .dismiss(episode, at: now)
    default:
      // A device's clock may be off by minutes either way.
      let skew = Duration.seconds(Int64.random(in: -600...600, using: &domain.random))
      command = .updatePosition(
        episode,
        seconds: Int.random(in: 0...3_600, using: &domain.random),
        at: now.advanced(by: skew),
        device: "d\(index)"
      )
    }
    domain.commands += 1
    devices[index].actionsSaved += 1
    let (_, actions) = devices[index].core.submit(command, now: now)
    perform(actions, on: index)
  }

  /// The broadcaster publishes (now, in the past or on a schedule), edits an episode's metadata (sometimes
  /// with new media), unpublishes or publishes again, then publishes what came due.
  mutating func broadcasterActs() {
    let catalog = server.application.catalogIDs
    switch Int.random(in: 0..<6, using: &domain.random) {
    case 0, 1, 2:
      publish(
        show: EpisodeDomain.shows.randomElement(using: &domain.random)!,
        hoursAgo: Double.random(in: -1...48, using: &domain.random)
      )
    case 3:
      if let episode = catalog.randomElement(using: &domain.random) {
        broadcast(
          .editMeta(
            episode,
            title: "edit \(Int.random(in: 0...99, using: &domain.random))",
            url: "https://m/\(episode)",
            newMedia: domain.random.chance(0.3)
          )
        )
      }
    case 4:
      if let episode = catalog.randomElement(using: &domain.random) { broadcast(.unpublish(episode)) }
    default:
      if let episode = catalog.randomElement(using: &domain.random), let meta = server.application.meta(of: episode) {
        broadcast(.publish(episode, meta))
      }
    }
    broadcast(.publishDue)
  }

  /// Publishes a new episode of `show`, dated `hoursAgo` (negative: scheduled for later).
  mutating func publish(show: ShowID, hoursAgo: Double) {
    domain.nextEpisode += 1
    let episode = EpisodeID(rawValue: String(format: "ep%04d", domain.nextEpisode))
    let meta = EpisodeMeta(
      show: show,
      title: "\(show) \(domain.nextEpisode)",
      url: "https://m/\(episode)",
      publishedAt: now.advanced(by: .seconds(-hoursAgo * 3600))
    )
    broadcast(.publish(episode, meta))
  }

  /// The broadcaster's command reaches the server (a node drawn at random, with a cluster).
  mutating func broadcast(_ command: AdminCommand) {
    domain.commands += 1
    serveRandomNode()
    guard let actions = try? server.handle(.admin(command), from: EpisodeDomain.broadcaster, now: now) else {
      return
    }
    applyServer(actions)
    recordVersions()
  }

  // MARK: - Following the engine

  /// After the engine moved: check the metadata versions, and start (and, in this world, finish at once
  /// when online) the downloads the confirmed state asks for, checking each start.
  mutating func followDownloads(_ index: Int) {
    let device = devices[index]
    guard let confirmed = device.confirmedState else { return }
    for (episode, meta) in confirmed.meta {
      let highest = device.extra.highestMeta[episode] ?? 0
      if meta.metaVersion < highest {
        violations.append("[\(clockText(now))] device \(index): metaVersion of \(episode) went back")
      }
      device.extra.highestMeta[episode] = max(meta.metaVersion, highest)
    }
    let live = device.isConfirmedThisSession
    let pending = device.pendingMutations.map(\.mutation)
    for action in device.extra.downloads.update(confirmed: confirmed, isConfirmedThisSession: live, pending: pending) {
      guard case .start(let episode, let version, _) = action else { continue }
      domain.downloadsStarted += 1
      let meta = confirmed.meta[episode]
      if !live || confirmed.queued(episode) == nil || meta?.available != true {
        violations.append("[\(clockText(now))] device \(index) started \(episode) from stale or unqueued state")
      }
      if Self.finishedHere(episode, pending: pending) {
        violations.append("[\(clockText(now))] device \(index) downloads \(episode), which it finished or dismissed")
      }
      if device.online {
        device.extra.downloads.downloadFinished(episode, mediaVersion: version)
      } else {
        device.extra.downloads.downloadInterrupted(episode)
      }
    }
  }

  /// Whether the device's last pending write about `episode` finished or dismissed it (no download of an
  /// episode this device finished, confirmed or not).
  static func finishedHere(_ episode: EpisodeID, pending: [EpisodeCommand]) -> Bool {
    for command in pending.reversed() {
      switch command {
      case .markFinished(episode, _), .dismiss(episode, _): return true
      case .enqueue(episode, _, _): return false
      default: continue
      }
    }
    return false
  }
}
