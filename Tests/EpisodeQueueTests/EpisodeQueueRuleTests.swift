import EpisodeQueue
import EventProtocol
import EventServer
import TestScheduling
import Testing
import UpdateMachineTesting

/// The rules of docs/episode-queue.md §3–§4, case by case (§5's numbers), on the server application.
@Suite("EpisodeQueue rules: fetches, moves, positions, terminal states, catalog")
struct EpisodeQueueRuleTests {
  @Test("3. A fetch whose answer was lost, retried with the same mutation id, applies once")
  func fetchRetriedOnce() throws {
    var server = EventServerStateMachine(
      application: EpisodeServer(admins: [kpcc]),
      random: SeededRandomNumberGenerator(seed: 1),
      now: t0
    )
    let meta = EpisodeMeta(show: "s", title: "e1", url: "u", publishedAt: t0.advanced(by: .seconds(-60)))
    _ = try server.handle(.admin(.publish("e1", meta)), from: kpcc, now: t0)
    _ = try server.handle(.favorite("s"), from: "ann", now: t0)
    let request = MutationRequest(
      clientID: "P",
      mutationID: MutationID(1),
      mutation: EpisodeCommand.fetchNew(shows: nil)
    )
    let (first, _) = try server.applyMutation(request, from: "ann", now: t0)
    let (again, _) = try server.applyMutation(request, from: "ann", now: t0)
    #expect(first.applied && !again.applied)
    #expect(server.application.snapshot(for: "ann").queue.map(\.episode) == ["e1"])
  }

  @Test("9. Both devices move the same item: the later in server order wins")
  func sameItemMovedTwice() {
    var desk = Desk()
    for (index, id) in ["A", "B", "C"].enumerated() {
      desk.publish(EpisodeID(rawValue: id), "s", hoursAgo: Double(index))
    }
    desk.run(.favorite("s"), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    desk.run(.move("C", .top), from: "ann")
    desk.run(.move("C", .after("A")), from: "ann")
    #expect(desk.queue("ann") == ["A", "C", "B"])
  }

  @Test("10. Move after X while X is dismissed: lands at X's last key")
  func afterDismissedAnchor() {
    var desk = Desk()
    for (index, id) in ["A", "B", "C", "D"].enumerated() {
      desk.publish(EpisodeID(rawValue: id), "s", hoursAgo: Double(index))
    }
    desk.run(.favorite("s"), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    desk.run(.dismiss("B", at: desk.now), from: "ann")
    desk.run(.move("D", .after("B")), from: "ann")
    #expect(desk.queue("ann") == ["A", "D", "C"])
    desk.run(.move("A", .after("unknown-x")), from: "ann")
    #expect(desk.queue("ann") == ["D", "C", "A"])
  }

  @Test("11. Positions: an older offline update loses, a deliberate rewind wins, a fast clock is clamped")
  func positions() {
    var desk = Desk()
    desk.publish("E", "s")
    desk.run(.favorite("s"), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    desk.advance(.seconds(100))
    desk.run(.updatePosition("E", seconds: 1_200, at: desk.now, device: "P"), from: "ann")
    desk.run(.updatePosition("E", seconds: 300, at: desk.now.advanced(by: .seconds(-50)), device: "T"), from: "ann")
    #expect(desk.projection("ann").queued("E")?.position?.seconds == 1_200)
    desk.advance(.seconds(10))
    desk.run(.updatePosition("E", seconds: 600, at: desk.now, device: "P"), from: "ann")
    #expect(desk.projection("ann").queued("E")?.position?.seconds == 600)
    // T's clock is a day fast: its time is clamped to the server's, so the next real update still wins.
    desk.advance(.seconds(10))
    desk.run(.updatePosition("E", seconds: 700, at: desk.now.advanced(by: .seconds(86_400)), device: "T"), from: "ann")
    #expect(desk.projection("ann").queued("E")?.position?.at == desk.now)
    desk.advance(.seconds(10))
    desk.run(.updatePosition("E", seconds: 800, at: desk.now, device: "P"), from: "ann")
    #expect(desk.projection("ann").queued("E")?.position?.seconds == 800)
  }

  @Test("12 and 13. Equal dates: a deterministic pick by id; a backdated or same-dated later episode is found")
  func tiesAndBackdating() {
    var desk = Desk()
    desk.run(.setSettings(EpisodeSettings(n: 1)), from: "ann")
    desk.publish("e-a", "s", hoursAgo: 5)
    desk.publish("e-b", "s", hoursAgo: 5)
    desk.run(.favorite("s"), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    #expect(desk.queue("ann") == ["e-b"])
    // Published later with the same date as one already fetched, then one backdated a week: both found.
    desk.publish("e-c", "s", hoursAgo: 5)
    desk.run(.fetchNew(shows: nil), from: "ann")
    desk.publish("e-old", "s", hoursAgo: 24 * 7)
    desk.run(.fetchNew(shows: nil), from: "ann")
    #expect(desk.queue("ann") == ["e-b", "e-c", "e-old"])
  }

  @Test("14. Five new with n = 2: the two newest; raising n to 10 never adds the other three")
  func nBoundsAFetch() {
    var desk = Desk()
    desk.run(.setSettings(EpisodeSettings(n: 2)), from: "ann")
    desk.run(.favorite("s"), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    for index in 0..<5 { desk.publish(EpisodeID(rawValue: "e\(index)"), "s", hoursAgo: Double(10 - index)) }
    desk.run(.fetchNew(shows: nil), from: "ann")
    #expect(desk.queue("ann") == ["e4", "e3"])
    desk.run(.setSettings(EpisodeSettings(n: 10)), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    #expect(desk.queue("ann") == ["e4", "e3"])
  }

  @Test("15 and 16. A favorite added later gets its n newest, others their delta; re-favorite brings no burst")
  func favoritesLaterAndAgain() {
    var desk = Desk()
    desk.run(.setSettings(EpisodeSettings(n: 2)), from: "ann")
    for index in 0..<4 { desk.publish(EpisodeID(rawValue: "a\(index)"), "a", hoursAgo: Double(10 - index)) }
    desk.run(.favorite("a"), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    #expect(desk.queue("ann") == ["a3", "a2"])
    desk.advance(.seconds(90 * 86_400))
    for index in 0..<4 { desk.publish(EpisodeID(rawValue: "b\(index)"), "b", hoursAgo: Double(10 - index)) }
    desk.publish("a4", "a")
    desk.run(.favorite("b"), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    #expect(desk.queue("ann") == ["a3", "a2", "a4", "b3", "b2"])
    desk.run(.unfavorite("a"), from: "ann")
    for index in 5..<9 { desk.publish(EpisodeID(rawValue: "a\(index)"), "a", hoursAgo: Double(10 - index)) }
    desk.run(.favorite("a"), from: "ann")
    desk.run(.fetchNew(shows: ["a"]), from: "ann")
    #expect(desk.queue("ann").filter { $0.rawValue.hasPrefix("a") }.count == 5)
  }

  @Test("20. Play again: with a current basis restored at the top from 0:00; with a stale basis superseded")
  func playAgain() {
    var desk = Desk()
    desk.publish("E", "s", hoursAgo: 2)
    desk.publish("F", "s", hoursAgo: 1)
    desk.run(.favorite("s"), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    desk.run(.updatePosition("E", seconds: 900, at: desk.now, device: "P"), from: "ann")
    desk.run(.markFinished("E", at: desk.now), from: "ann")
    let terminalRev = desk.rev(of: "E", "ann")!
    let stale = desk.run(.enqueue("E", .top, basis: terminalRev - 1), from: "ann")
    #expect(stale.isEmpty)
    #expect(desk.projection("ann").terminal("E") != nil)
    desk.run(.enqueue("E", .top, basis: terminalRev), from: "ann")
    #expect(desk.queue("ann") == ["E", "F"])
    #expect(
      desk.projection("ann").queued("E")?.position
        == Position(seconds: 0, at: desk.now, device: Position.restartDevice)
    )
    #expect(desk.server.restorations.allSatisfy { $0.basis >= $0.terminalRev })
  }

  @Test("21. Finished on P races dismiss on T: finished, one history entry")
  func finishedWins() {
    var desk = Desk()
    desk.publish("E", "s")
    desk.run(.favorite("s"), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    desk.run(.dismiss("E", at: desk.now), from: "ann")
    desk.run(.markFinished("E", at: desk.now), from: "ann")
    desk.run(.dismiss("E", at: desk.now), from: "ann")
    let history = desk.projection("ann").history
    #expect(history.count == 1 && history[0].finished)
  }

  @Test("I1: a fetch, a republish, an edit, a re-favorite or a change of n never touches a terminal record")
  func terminalAbsorbs() {
    var desk = Desk()
    desk.publish("E", "s")
    desk.run(.favorite("s"), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    desk.run(.dismiss("E", at: desk.now), from: "ann")
    let before = desk.projection("ann").terminal("E")
    desk.run(.admin(.unpublish("E")), from: kpcc)
    desk.run(.admin(.publish("E", desk.server.meta(of: "E")!)), from: kpcc)
    desk.run(.admin(.editMeta("E", title: "t", url: "u", newMedia: true)), from: kpcc)
    desk.run(.unfavorite("s"), from: "ann")
    desk.run(.favorite("s"), from: "ann")
    desk.run(.setSettings(EpisodeSettings(n: 50)), from: "ann")
    desk.run(.fetchNew(shows: nil), from: "ann")
    desk.run(.updatePosition("E", seconds: 5, at: desk.now, device: "P"), from: "ann")
    #expect(desk.projection("ann").terminal("E") == before)
    #expect(desk.queue("ann").isEmpty)
  }

  @Test("Scheduled publishing: invisible until the server's clock reaches its date; autoAdd adds it then")
  func scheduledAndAutoAdd() {
    var desk = Desk()
    desk.run(.setSettings(EpisodeSettings(n: 5, autoAdd: true)), from: "ann")
    desk.run(.favorite("s"), from: "ann")
    desk.publish("later", "s", hoursAgo: -2)
    desk.run(.fetchNew(shows: nil), from: "vic")
    #expect(desk.queue("ann").isEmpty)
    desk.advance(.seconds(3 * 3600))
    desk.run(.admin(.publishDue), from: kpcc)
    #expect(desk.queue("ann") == ["later"])
  }

  @Test("A catalog event for an episode a device does not hold is ignored; an older version never overwrites")
  func reducerCatalogRules() throws {
    let reducer = EpisodeReducer()
    var state = EpisodeProjection()
    let meta = EpisodeMeta(show: "s", title: "v2", url: "u", publishedAt: t0, metaVersion: 2)
    try reducer.apply(.episodeUpdated("unknown", meta), to: &state)
    #expect(state.meta.isEmpty)
    let item = QueueItem(episode: "E", key: 1, position: nil, rev: 1)
    try reducer.apply(.queued(item, meta, refill: nil, refillMeta: nil, rev: 1), to: &state)
    var older = meta
    older.title = "v1"
    older.metaVersion = 1
    try reducer.apply(.episodeUpdated("E", older), to: &state)
    #expect(state.meta["E"]?.title == "v2")
  }

  @Test(
    "The convergence law: events after any cut, applied to that cut's snapshot, give the final one",
    .cpuBound,
    arguments: 0..<300 as Range<UInt64>
  )
  func convergenceLaw(seed: UInt64) {
    var random = SeededRandomNumberGenerator(seed: seed)
    let commands = RandomEpisodeCommands.make(count: 60, using: &random)
    #expect(
      ConvergenceCheck.check(
        application: EpisodeServer(admins: [kpcc]),
        reducer: EpisodeReducer(),
        users: ["ann", "vic"],
        commands: commands
      ) == nil
    )
  }
}

/// Random commands from ann, vic and the broadcaster, over a small catalog so they collide.
enum RandomEpisodeCommands {
  static let episodes: [EpisodeID] = (0..<8).map { EpisodeID(rawValue: "e\($0)") }
  static let shows: [ShowID] = ["a", "b"]

  static func make(count: Int, using random: inout SeededRandomNumberGenerator) -> [(UserID, EpisodeCommand)] {
    var commands: [(UserID, EpisodeCommand)] = []
    for (index, episode) in episodes.prefix(4).enumerated() {
      let meta = EpisodeMeta(show: shows[index % 2], title: "\(episode)", url: "u", publishedAt: t0)
      commands.append((kpcc, .admin(.publish(episode, meta))))
    }
    for _ in 0..<count { commands.append(command(using: &random)) }
    return commands
  }

  static func command(using random: inout SeededRandomNumberGenerator) -> (UserID, EpisodeCommand) {
    let user: UserID = Bool.random(using: &random) ? "ann" : "vic"
    let episode = episodes.randomElement(using: &random)!
    let show = shows.randomElement(using: &random)!
    let placement: Placement = [.top, .bottom, .after(episodes.randomElement(using: &random)!)].randomElement(
      using: &random
    )!
    switch Int.random(in: 0..<14, using: &random) {
    case 0: return (user, .favorite(show))
    case 1: return (user, .unfavorite(show))
    case 2:
      return (
        user,
        .setSettings(EpisodeSettings(n: Int.random(in: 1...3, using: &random), autoAdd: Bool.random(using: &random)))
      )
    case 3, 4: return (user, .fetchNew(shows: nil))
    case 5: return (user, .enqueue(episode, placement, basis: Int.random(in: 0...40, using: &random)))
    case 6: return (user, .move(episode, placement))
    case 7: return (user, .markFinished(episode, at: t0))
    case 8: return (user, .dismiss(episode, at: t0))
    case 9:
      return (user, .updatePosition(episode, seconds: Int.random(in: 0...3_000, using: &random), at: t0, device: "d"))
    case 10:
      let meta = EpisodeMeta(show: show, title: "\(episode)", url: "u", publishedAt: t0)
      return (kpcc, .admin(.publish(episode, meta)))
    case 11:
      return (
        kpcc,
        .admin(
          .editMeta(
            episode,
            title: "t\(Int.random(in: 0...9, using: &random))",
            url: "u",
            newMedia: Bool.random(using: &random)
          )
        )
      )
    case 12: return (kpcc, .admin(.unpublish(episode)))
    default: return (user, .enqueue(episode, placement, basis: nil))
    }
  }
}
