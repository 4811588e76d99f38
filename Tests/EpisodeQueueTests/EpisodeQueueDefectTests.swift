import EpisodeQueue
import EventProtocol
import EventServer
import Foundation
import Testing
import UpdateMachine
import UpdateMachineTesting

/// The episode queue as its users would judge it: ties go to server order, "play again" is not undone by a
/// stale position, a finish still in the outbox stops downloads, the outbox sends one position per
/// episode, scheduled episodes publish on the server's own clock (and their date can be edited), and the
/// server's per-listener work follows the queue, not the history.
@Suite("EpisodeQueue: positions, play again, pending finishes, scheduling, bounded history")
struct EpisodeQueueDefectTests {
  @Test("two positions stamped alike: the later in server order wins (§3)")
  func positionTiesGoToServerOrder() {
    var desk = Desk()
    desk.publish("E", "s")
    desk.run(.favorite("s"), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    desk.run(.updatePosition("E", seconds: 100, at: desk.now, device: "P"), from: "ann")
    desk.run(.updatePosition("E", seconds: 250, at: desk.now, device: "T"), from: "ann")
    #expect(desk.projection("ann").queued("E")?.position == Position(seconds: 250, at: desk.now, device: "T"))
  }

  @Test("play again restarts at 0 s, stamped at the restart: a position from before the finish never undoes it")
  func staleRestartPosition() {
    var desk = Desk()
    desk.publish("E", "s")
    desk.run(.favorite("s"), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    let beforeFinish = desk.now
    desk.advance(.seconds(60))
    desk.run(.markFinished("E", at: desk.now), from: "ann")
    desk.advance(.seconds(30 * 86_400))
    desk.run(.enqueue("E", .top, basis: desk.rev(of: "E", "ann")), from: "ann")
    let restart = desk.now
    #expect(desk.projection("ann").queued("E")?.position?.seconds == 0)
    #expect(desk.projection("ann").queued("E")?.position?.at == restart)
    // A month-old update from an offline tablet, stamped before the finish, arrives now.
    desk.advance(.seconds(10))
    desk.run(.updatePosition("E", seconds: 720, at: beforeFinish, device: "T"), from: "ann")
    #expect(desk.projection("ann").queued("E")?.position?.seconds == 0)
    #expect(desk.server.superseded.last?.contains("position of E") == true)
    // Listening after the restart moves it on.
    desk.run(.updatePosition("E", seconds: 30, at: desk.now, device: "P"), from: "ann")
    #expect(desk.projection("ann").queued("E")?.position?.seconds == 30)
  }

  @Test("a finish still in the outbox: no download of new media, and the old file goes")
  func pendingFinishStopsDownloads() {
    var meta = EpisodeMeta(show: "s", title: "E", url: "u", publishedAt: t0)
    var projection = EpisodeProjection()
    projection.queue = [QueueItem(episode: "E", key: 1, position: nil, rev: 1)]
    projection.meta["E"] = meta
    var downloads = EpisodeDownloads(keep: 5)
    let first = downloads.update(confirmed: projection, isConfirmedThisSession: true, pending: [])
    #expect(first == [.start("E", mediaVersion: 1, url: "u")])
    downloads.downloadFinished("E", mediaVersion: 1)
    // The poll brings a media replacement before the device's finish is confirmed.
    meta.mediaVersion = 2
    projection.meta["E"] = meta
    var control = downloads
    #expect(
      control.update(confirmed: projection, isConfirmedThisSession: true, pending: [])
        == [.delete("E"), .start("E", mediaVersion: 2, url: "u")]
    )
    let finished = downloads.update(
      confirmed: projection,
      isConfirmedThisSession: true,
      pending: [.updatePosition("E", seconds: 1_790, at: t0, device: "P"), .markFinished("E", at: t0)]
    )
    #expect(finished == [.delete("E")])
    // "Play again" queued after the finish, both pending: the episode is wanted again.
    let replayed = downloads.update(
      confirmed: projection,
      isConfirmedThisSession: true,
      pending: [.markFinished("E", at: t0), .enqueue("E", .top, basis: 9)]
    )
    #expect(replayed == [.start("E", mediaVersion: 2, url: "u")])
  }

  /// The scenario through the whole engine, the download manager run after every step: a phone
  /// finishes an episode offline (the finish waits in its outbox), the broadcaster replaces the episode's
  /// audio, and the phone comes back online, after an hour or after its queue expired. At no step may it
  /// start downloading the new audio: the shown state says finished until the finish is confirmed, and then
  /// the confirmed state does.
  @Test(
    "a finish waiting in the outbox stops the replacement audio's download at every step of the reconnection",
    arguments: [3_600.0, 30 * 3_600.0]
  )
  func pendingFinishAcrossReconnection(offlineSeconds: Double) {
    var listeners = Listeners(["ann"])
    listeners.publish("E", "s")
    listeners.world.submit(.favorite("s"), on: 0)
    listeners.world.submit(.fetchNew(shows: nil), on: 0)
    listeners.settle()
    #expect(listeners.started.map(\.episode) == ["E"])
    // Offline: the finish waits in the outbox while the broadcaster replaces the audio.
    listeners.world.submit(.markFinished("E", at: listeners.now), on: 0)
    listeners.admin(.editMeta("E", title: "s E", url: "https://media.example/E-v2.mp3", newMedia: true))
    listeners.world.advance(to: listeners.now.advanced(by: .seconds(offlineSeconds)))
    var steps = 0
    while !listeners.world.runUntilSettled(online: [0], maximumSteps: 1), steps < 20_000 {
      listeners.syncDownloads(0)
      steps += 1
    }
    listeners.syncDownloads(0)
    #expect(listeners.world.isSettled(0))
    #expect(listeners.started.map(\.episode) == ["E"], "the replacement audio was downloaded")
    #expect(listeners.downloads[0].files["E"] == nil, "the finished episode's file was kept")
    #expect(listeners.confirmed(0).terminal("E") != nil)
  }

  /// The same with a second device of the same user, online throughout: the phone finishes the episode
  /// offline, the broadcaster replaces the audio, the tablet downloads the new version; when the phone comes
  /// back, the tablet's file goes once the finish is confirmed, and the phone, whose shown state says
  /// finished at every step, never starts the new version.
  @Test(
    "a finish in the phone's outbox: the tablet's replacement download goes, and the phone never starts one",
    arguments: [3_600.0, 30 * 3_600.0]
  )
  func pendingFinishOnPhoneWhileTabletDownloads(offlineSeconds: Double) {
    let phone = 0
    let tablet = 1
    var listeners = Listeners(["ann", "ann"])
    listeners.publish("E", "s")
    listeners.world.submit(.favorite("s"), on: phone)
    listeners.world.submit(.fetchNew(shows: nil), on: phone)
    listeners.settle()
    #expect(listeners.started.map(\.device).sorted() == [phone, tablet])
    // The phone is offline: its finish waits in the outbox while the audio is replaced; the tablet's
    // download of the new audio is still under way when the phone comes back.
    listeners.holding = ["E"]
    listeners.world.submit(.markFinished("E", at: listeners.now), on: phone)
    listeners.admin(.editMeta("E", title: "s E", url: "https://media.example/E-v2.mp3", newMedia: true))
    listeners.settle(online: [tablet])
    #expect(listeners.started.dropFirst(2).map(\.device) == [tablet], "the tablet downloads the new audio")
    #expect(listeners.downloads[tablet].inFlight["E"] == 2 && listeners.downloads[tablet].files["E"] == nil)
    listeners.world.advance(to: listeners.now.advanced(by: .seconds(offlineSeconds)))
    var steps = 0
    while !listeners.world.runUntilSettled(online: [phone, tablet], maximumSteps: 1), steps < 20_000 {
      listeners.syncDownloads(phone)
      listeners.syncDownloads(tablet)
      steps += 1
    }
    listeners.syncDownloads(phone)
    listeners.syncDownloads(tablet)
    #expect(listeners.world.isSettled(phone) && listeners.world.isSettled(tablet))
    let phoneStarts = listeners.started.filter { $0.device == phone }.map(\.episode)
    #expect(phoneStarts == ["E"], "the phone downloaded the audio of an episode it finished")
    #expect(listeners.downloads[phone].files["E"] == nil, "the phone kept the finished episode's file")
    #expect(listeners.downloads[tablet].files["E"] == nil, "the tablet kept the finished episode's file")
    #expect(listeners.downloads[tablet].inFlight.isEmpty, "the tablet's download of the new audio went on")
    #expect(listeners.confirmed(phone).terminal("E") != nil && listeners.confirmed(tablet).terminal("E") != nil)
  }

  @Test("a day offline: the outbox keeps one unsent position per episode, and the server gets the latest")
  func outboxKeepsLatestPosition() {
    var listeners = Listeners(["ann"])
    listeners.publish("E", "s")
    listeners.publish("F", "s", hoursAgo: 2)
    listeners.world.submit(.favorite("s"), on: 0)
    listeners.world.submit(.fetchNew(shows: nil), on: 0)
    listeners.settle()
    let start = listeners.now
    for second in 1...2_000 {
      let at = start.advanced(by: .seconds(Int64(second)))
      listeners.world.submit(.updatePosition("E", seconds: second, at: at, device: "P"), on: 0)
      if second % 500 == 0 { listeners.world.submit(.updatePosition("F", seconds: second, at: at, device: "P"), on: 0) }
    }
    let pending = listeners.world.devices[0].core.pendingMutations
    let positions = pending.filter { if case .updatePosition = $0.mutation { true } else { false } }
    // At most the one already sent before the device noticed it was offline, plus the latest per episode.
    #expect(positions.count <= 3, "\(positions.count) positions pending")
    #expect(
      positions.last?.mutation
        == .updatePosition("F", seconds: 2_000, at: start.advanced(by: .seconds(2_000)), device: "P")
    )
    listeners.world.advance(to: start.advanced(by: .seconds(2_001)))
    listeners.settle()
    #expect(listeners.snapshot("ann").queued("E")?.position?.seconds == 2_000)
    #expect(listeners.snapshot("ann").queued("F")?.position?.seconds == 2_000)
    #expect(listeners.confirmed(0) == listeners.snapshot("ann"))
  }

  @Test("a scheduled episode publishes on the server's own clock, with no command, and durably")
  func scheduledPublishing() throws {
    var server = EventServerStateMachine(
      application: EpisodeServer(admins: [kpcc]),
      random: SeededRandomNumberGenerator(seed: 1),
      now: t0
    )
    server.startRecording()
    _ = try server.handle(.setSettings(EpisodeSettings(n: 5, autoAdd: true)), from: "ann", now: t0)
    _ = try server.handle(.favorite("s"), from: "ann", now: t0)
    let (registration, _) = server.register(user: "ann", eventTypes: nil, lifespan: nil, clientID: nil, now: t0)
    let date = t0.advanced(by: .seconds(120))
    let meta = EpisodeMeta(show: "s", title: "Later", url: "u", publishedAt: date)
    _ = try server.handle(.admin(.publish("L", meta)), from: kpcc, now: t0)
    #expect(server.application.snapshot(for: "ann").queue.isEmpty)
    #expect(server.application.nextDeadline == date)
    #expect(server.nextDeadline <= date)
    _ = server.timerFired(now: date)
    #expect(server.application.snapshot(for: "ann").queue.map(\.episode) == ["L"])
    let events = server.queue(registration.queueID)!.events.compactMap { envelope -> EpisodeEvent? in
      if case .payload(let event) = envelope.body { event } else { nil }
    }
    #expect(events.contains { if case .fetched = $0 { true } else { false } })
    #expect(server.application.nextDeadline == nil)
    // Replayed from the log, the publication happens at the same point.
    let records = try server.takeRecordedEntries().enumerated().map { index, entry in
      StoredRecord(position: UInt64(index + 1), bytes: try ServerLogCodec.encode(entry))
    }
    let (rebuilt, _) = try EventServerStateMachine<EpisodeServer>.rebuilding(
      from: StoredLog(snapshot: nil, records: records),
      application: EpisodeServer(admins: [kpcc]),
      configuration: server.configuration,
      random: SeededRandomNumberGenerator(seed: 0),
      now: t0
    )
    #expect(rebuilt.application == server.application)
    #expect(rebuilt.dump() == server.dump())
  }

  @Test("editMeta moves a scheduled episode's date: earlier, later, or into the past (published at once)")
  func editPublishedAt() {
    var desk = Desk()
    desk.run(.favorite("s"), from: "ann")
    desk.publish("S", "s", hoursAgo: -2)
    #expect(desk.server.nextDeadline == desk.now.advanced(by: .seconds(7_200)))
    desk.run(
      .admin(.editMeta("S", title: "S", url: "u", newMedia: false, publishedAt: desk.now.advanced(by: .seconds(600)))),
      from: kpcc
    )
    #expect(desk.server.nextDeadline == desk.now.advanced(by: .seconds(600)))
    desk.run(.fetchNew(shows: nil), from: "ann")
    #expect(desk.queue("ann").isEmpty)
    desk.run(
      .admin(.editMeta("S", title: "S", url: "u", newMedia: false, publishedAt: desk.now.advanced(by: .seconds(-60)))),
      from: kpcc
    )
    #expect(desk.server.nextDeadline == nil)
    desk.run(.fetchNew(shows: nil), from: "ann")
    #expect(desk.queue("ann") == ["S"])
    #expect(desk.projection("ann").meta["S"]?.publishedAt == desk.now.advanced(by: .seconds(-60)))
  }

  @Test(
    "play again a thousand times: the audit stays bounded; indexes rebuilt from a snapshot agree",
    arguments: [1, 2, 3] as [UInt64]
  )
  func boundedHistoryAndIndexes(seed: UInt64) throws {
    var desk = Desk()
    var random = SeededRandomNumberGenerator(seed: seed)
    let episodes: [EpisodeID] = (0..<12).map { EpisodeID(rawValue: "e\($0)") }
    for (index, episode) in episodes.enumerated() { desk.publish(episode, "s", hoursAgo: Double(index + 1)) }
    desk.run(.favorite("s"), from: "ann")
    desk.run(.setSettings(EpisodeSettings(n: 12)), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    for _ in 0..<10_000 {
      let episode = episodes.randomElement(using: &random)!
      desk.advance(.seconds(1))
      switch Int.random(in: 0..<4, using: &random) {
      case 0: desk.run(.markFinished(episode, at: desk.now), from: "ann")
      case 1: desk.run(.dismiss(episode, at: desk.now), from: "ann")
      case 2: desk.run(.enqueue(episode, .top, basis: desk.rev(of: episode, "ann")), from: "ann")
      default:
        let anchor = episodes.randomElement(using: &random)!
        desk.run(.move(episode, .after(anchor)), from: "ann")
      }
    }
    #expect(desk.server.restorations.count == EpisodeServer.restorationAuditLimit)
    let decoded = try JSONDecoder().decode(EpisodeServer.self, from: try JSONEncoder().encode(desk.server))
    #expect(decoded.snapshot(for: "ann") == desk.server.snapshot(for: "ann"))
    #expect(decoded == desk.server)
    let projection = desk.projection("ann")
    #expect(projection.queue.map(\.key) == projection.queue.map(\.key).sorted())
    #expect(Set(projection.queue.map(\.episode)).isDisjoint(with: projection.history.map(\.episode)))
  }
}
