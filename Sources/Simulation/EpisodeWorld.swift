import EpisodeQueue
import EventProtocol
import EventServer
import Foundation
import UpdateMachine

/// The world behind ``EpisodeSimulation``: a server core, devices with engine cores and download managers,
/// and a heap of timed happenings (requests and answers in flight, timers, listener and broadcaster
/// actions, faults).
struct EpisodeWorld {
  typealias Core = UpdateMachineCore<EpisodeProjection, EpisodeEvent, EpisodeCommand>
  typealias Server = EventServerStateMachine<EpisodeServer>

  enum Exchange {
    case register
    case poll(EventFinger, dontBlock: Bool)
    case submit(MutationRequest<EpisodeCommand>)
  }

  enum Happening {
    case reachesServer(device: Int, epoch: Int, request: RequestID, exchange: Exchange, losesAnswer: Bool)
    case reachesDevice(device: Int, epoch: Int, request: RequestID, answer: Result<[UInt8], TransportError>)
    case deviceTimer(device: Int, generation: Int)
    case serverTimer
    case listenerActs(device: Int)
    case broadcasterActs
    case goesOffline(device: Int)
    case comesOnline(device: Int)
    case crash(device: Int)
    case serverRestart
    case serverLogCommit
    case serverCrash
    case faultsStop
    /// A cluster node's timer (heartbeats, sweeps, the application's deadlines).
    case nodeTimer(node: Int)
    /// A cluster node reads what the others committed.
    case nodeFollows(node: Int)
  }

  struct Device {
    let user: UserID
    var core: Core
    var downloads = EpisodeDownloads(keep: 5)
    var disk: PersistedRecord<EpisodeProjection, EpisodeCommand>?
    var outstanding: [RequestID: Exchange] = [:]
    var parked: [RequestID: PollID] = [:]
    var online = true
    var epoch = 0
    var timerGeneration = 0
    var timerAt: Timestamp?
    var highestMeta: [EpisodeID: Int] = [:]
    var registrations = 0
  }

  let scenario: EpisodeSimulation.Scenario
  var random: SeededRandomNumberGenerator
  var now = Timestamp(secondsSinceEpoch: 1_700_000_000)
  /// When the world (and every server node's empty state) began.
  let startTime = Timestamp(secondsSinceEpoch: 1_700_000_000)
  var happenings = DeadlineHeap<Happening>()
  var server: Server
  var devices: [Device] = []
  let users: [UserID]
  var faultsOn = true
  var parkedPolls: [PollID: (device: Int, request: RequestID)] = [:]
  var nextPollID: UInt64 = 0
  var serverTimerAt: Timestamp?
  /// The server's storage, and the answers waiting for their records to be durable.
  var durability = ServerDurability<EpisodeServer, Happening>()
  /// With several nodes: the cluster (``server`` is the node being served).
  var cluster: SimulatedCluster<EpisodeServer>?
  /// Each user's projections, in the order the server produced them.
  var history: [UserID: [EpisodeProjection]] = [:]
  var nextEpisode = 0
  var violations: [String] = []
  var commands = 0
  var batchesChecked = 0
  var downloadsStarted = 0

  static let broadcaster: UserID = "broadcaster"
  static let shows: [ShowID] = ["airtalk", "brief", "weekly"]

  init(scenario: EpisodeSimulation.Scenario) {
    self.scenario = scenario
    var random = SeededRandomNumberGenerator(seed: scenario.seed)
    var configuration = EventServerConfiguration()
    configuration.maximumIdleTimeout = .seconds(7 * 24 * 3600)
    server = Server(
      application: EpisodeServer(admins: [Self.broadcaster]),
      configuration: configuration,
      random: SeededRandomNumberGenerator(seed: random.next()),
      now: now
    )
    server.startRecording()
    users = (0..<max(scenario.users, 1)).map { UserID("listener\($0 + 1)") }
    if scenario.nodes > 1 {
      var nodes = [server]
      for _ in 1..<scenario.nodes { nodes.append(Self.emptyNode(configuration, random: &random, now: now)) }
      cluster = SimulatedCluster(nodes: nodes)
    }
    self.random = random
    for user in users {
      history[user] = [EpisodeProjection()]
      for _ in 0..<Int.random(in: scenario.devicesPerUser, using: &self.random) {
        var engine = UpdateMachineConfiguration()
        engine.queueLifespan = .seconds(3600)
        let core = Core(
          reducer: EpisodeReducer(),
          configuration: engine,
          random: SeededRandomNumberGenerator(seed: self.random.next())
        )
        devices.append(Device(user: user, core: core))
      }
    }
  }

  // MARK: - Running

  mutating func run() -> EpisodeSimulation.Report {
    for index in 0..<6 { publish(show: Self.shows[index % Self.shows.count], hoursAgo: Double(6 - index)) }
    for index in devices.indices {
      perform(devices[index].core.loaded(nil, now: now), on: index)
      schedule(.listenerActs(device: index), after: .seconds(Int64.random(in: 1...120, using: &random)))
      schedule(.goesOffline(device: index), after: exponential(perHour: scenario.faults.offlinePerHour))
      schedule(.crash(device: index), after: exponential(perHour: scenario.faults.crashesPerHour))
    }
    schedule(.broadcasterActs, after: .seconds(300))
    schedule(.serverRestart, after: exponential(perHour: scenario.faults.serverRestartsPerHour))
    schedule(.faultsStop, after: scenario.duration)
    rescheduleServerTimer()
    let deadline = now.advanced(by: scenario.duration).advanced(by: .seconds(6 * 3600))
    while let time = happenings.nextTime, time <= deadline {
      let (at, happening) = happenings.pop()!
      now = max(now, at)
      handle(happening)
      if !faultsOn, isSettled { break }
    }
    let converged = isSettled
    if !converged { violations.append("the world did not settle by \(deadline)") }
    finalChecks()
    return EpisodeSimulation.Report(
      violations: violations,
      converged: converged,
      devices: devices.count,
      commands: commands,
      batchesChecked: batchesChecked,
      downloadsStarted: downloadsStarted,
      reRegistrations: devices.reduce(0) { $0 + max($1.registrations - 1, 0) },
      nodeKills: cluster?.kills ?? 0
    )
  }

  mutating func handle(_ happening: Happening) {
    switch happening {
    case .reachesServer(let index, let epoch, let request, let exchange, let losesAnswer):
      guard devices[index].epoch == epoch else { return }
      if let count = cluster?.count { serveNode(Int.random(in: 0..<count, using: &random)) }
      serve(exchange, request: request, from: index, losesAnswer: losesAnswer)
    case .reachesDevice(let index, let epoch, let request, let answer):
      guard devices[index].epoch == epoch else { return }
      fireDueTimer(index)
      guard devices[index].epoch == epoch else { return }
      answerReachesDevice(index, request, devices[index].online ? answer : .failure(.connectionFailed()))
    case .deviceTimer(let index, let generation):
      guard devices[index].timerGeneration == generation else { return }
      devices[index].timerAt = nil
      perform(devices[index].core.timerFired(now: now), on: index)
    case .serverTimer:
      serverTimerAt = nil
      let applicationDue = server.application.nextDeadline.map { $0 <= now } ?? false
      let actions = server.timerFired(now: now)
      // The server's own deadlines (scheduled episodes published) change projections with no command.
      if applicationDue { noteProjections() }
      applyServer(actions)
    case .listenerActs(let index):
      if faultsOn {
        fireDueTimer(index)
        listenerActs(index)
        schedule(.listenerActs(device: index), after: .seconds(Int64.random(in: 30...900, using: &random)))
      }
    case .broadcasterActs:
      if faultsOn {
        broadcasterActs()
        schedule(.broadcasterActs, after: .seconds(Int64.random(in: 300...1800, using: &random)))
      }
    case .goesOffline(let index):
      guard faultsOn else { return }
      devices[index].online = false
      for request in devices[index].outstanding.keys.sorted() {
        schedule(
          .reachesDevice(
            device: index,
            epoch: devices[index].epoch,
            request: request,
            answer: .failure(.connectionFailed())
          ),
          after: .milliseconds(1)
        )
      }
      schedule(
        .comesOnline(device: index),
        after: .seconds(Int.random(in: scenario.faults.offlineSeconds, using: &random))
      )
    case .comesOnline(let index):
      fireDueTimer(index)
      devices[index].online = true
      perform(devices[index].core.networkBecameAvailable(now: now), on: index)
      if faultsOn { schedule(.goesOffline(device: index), after: exponential(perHour: scenario.faults.offlinePerHour)) }
    case .crash(let index):
      guard faultsOn else { return }
      crash(index)
      schedule(.crash(device: index), after: exponential(perHour: scenario.faults.crashesPerHour))
    case .serverRestart where cluster != nil:
      guard faultsOn else { return }
      killNode(Int.random(in: 0..<cluster!.count, using: &random))
      schedule(.serverRestart, after: exponential(perHour: scenario.faults.serverRestartsPerHour))
    case .nodeTimer(let node):
      guard cluster!.timerAt[node] != nil, cluster!.timerAt[node]! <= now else { return }
      cluster!.timerAt[node] = nil
      serveNode(node)
      let applicationDue = server.application.nextDeadline.map { $0 <= now } ?? false
      let actions = server.timerFired(now: now)
      if applicationDue { noteProjections() }
      applyServer(actions)
    case .nodeFollows(let node):
      serveNode(node)
    case .serverRestart:
      guard faultsOn else { return }
      // A crash strikes at the worst moment: while records wait for their group commit.
      if chance(scenario.faults.restartIsCrash) { durability.isCrashArmed = true } else { restartServer(crash: false) }
      schedule(.serverRestart, after: exponential(perHour: scenario.faults.serverRestartsPerHour))
    case .serverCrash:
      guard faultsOn else { return }
      restartServer(crash: true)
    case .serverLogCommit:
      for (happening, delay) in durability.commit(server: &server) { schedule(happening, after: delay) }
    case .faultsStop:
      faultsOn = false
      for index in devices.indices where !devices[index].online {
        devices[index].online = true
        perform(devices[index].core.networkBecameAvailable(now: now), on: index)
      }
    }
  }

  // MARK: - Devices

  /// A device timer due now or earlier whose happening has not run yet: its work comes before the next
  /// input, or a wake-up computed after `now` would leave it out (the engine's shell does the same).
  mutating func fireDueTimer(_ index: Int) {
    guard let due = devices[index].timerAt, due <= now else { return }
    devices[index].timerAt = nil
    devices[index].timerGeneration += 1
    perform(devices[index].core.timerFired(now: now), on: index)
  }

  mutating func perform(_ initial: [Core.Action], on index: Int) {
    let epoch = devices[index].epoch
    var actions = initial
    var position = 0
    while position < actions.count, devices[index].epoch == epoch {
      let action = actions[position]
      position += 1
      switch action {
      case .persist(let record, _):
        devices[index].disk = record
        actions += devices[index].core.persistSucceeded(record, now: now)
      case .register(let request, _, _, _):
        devices[index].registrations += 1
        send(.register, as: request, from: index)
      case .poll(let request, let finger, let dontBlock, _):
        send(.poll(finger, dontBlock: dontBlock), as: request, from: index)
      case .submit(let request, let body, _):
        send(.submit(body), as: request, from: index)
      case .fetch, .fetchFinished:
        // This world's apps hold no partial state: their cores never ask to fetch.
        break
      case .cancel(let request):
        devices[index].outstanding[request] = nil
        if let pollID = devices[index].parked.removeValue(forKey: request) {
          parkedPolls[pollID] = nil
          cancelPoll(pollID)
        }
      }
    }
    guard devices[index].epoch == epoch else { return }
    engineChanged(index)
  }

  mutating func send(_ exchange: Exchange, as request: RequestID, from index: Int) {
    devices[index].outstanding[request] = exchange
    let epoch = devices[index].epoch
    if !devices[index].online || (faultsOn && chance(scenario.faults.requestFailure / 2)) {
      schedule(
        .reachesDevice(device: index, epoch: epoch, request: request, answer: .failure(.connectionFailed())),
        after: latency()
      )
      return
    }
    if faultsOn && chance(scenario.faults.neverAnswer) { return }
    let losesAnswer = faultsOn && chance(scenario.faults.requestFailure / 2)
    schedule(
      .reachesServer(device: index, epoch: epoch, request: request, exchange: exchange, losesAnswer: losesAnswer),
      after: latency()
    )
  }

  mutating func answerReachesDevice(_ index: Int, _ request: RequestID, _ answer: Result<[UInt8], TransportError>) {
    guard let exchange = devices[index].outstanding.removeValue(forKey: request) else { return }
    devices[index].parked[request] = nil
    var core = devices[index].core
    let actions: [Core.Action]
    switch (exchange, answer) {
    case (.register, .success(let bytes)):
      do {
        actions = core.registerSucceeded(
          request,
          try WireFormat.decode(Registration<EpisodeProjection>.self, from: bytes),
          now: now
        )
      } catch {
        actions = core.registerFailed(request, .api(error), now: now)
      }
    case (.poll, .success(let bytes)):
      do {
        let events = try WireFormat.decode(EventsReply<EpisodeEvent>.self, from: bytes).events
        actions = core.pollSucceeded(request, events, now: now)
        batchesChecked += 1
        devices[index].core = core
        checkAgainstHistory(index, after: "a batch of \(events.count)")
        core = devices[index].core
      } catch {
        actions = core.pollFailed(request, .api(error), now: now)
      }
    case (.submit, .success(let bytes)):
      do {
        actions = core.submitSucceeded(
          request,
          try WireFormat.decode(MutationReceipt.self, from: bytes),
          now: now
        )
      } catch {
        actions = core.submitFailed(request, .api(error), now: now)
      }
    case (.register, .failure(let error)): actions = core.registerFailed(request, error, now: now)
    case (.poll, .failure(let error)): actions = core.pollFailed(request, error, now: now)
    case (.submit, .failure(let error)): actions = core.submitFailed(request, error, now: now)
    }
    devices[index].core = core
    perform(actions, on: index)
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

  /// After the engine moved: follow the confirmed state with the downloads, check the metadata versions,
  /// and set the timer.
  mutating func engineChanged(_ index: Int) {
    if let confirmed = devices[index].core.confirmedState {
      for (episode, meta) in confirmed.meta {
        if meta.metaVersion < devices[index].highestMeta[episode] ?? 0 {
          violations.append("[\(now)] device \(index): metaVersion of \(episode) went back")
        }
        devices[index].highestMeta[episode] = max(meta.metaVersion, devices[index].highestMeta[episode] ?? 0)
      }
      let live = devices[index].core.isConfirmedThisSession
      let pending = devices[index].core.pendingMutations.map(\.mutation)
      for action in devices[index].downloads.update(
        confirmed: confirmed,
        isConfirmedThisSession: live,
        pending: pending
      ) {
        guard case .start(let episode, let version, _) = action else { continue }
        downloadsStarted += 1
        let meta = confirmed.meta[episode]
        if !live || confirmed.queued(episode) == nil || meta?.available != true {
          violations.append("[\(now)] device \(index) started \(episode) from stale or unqueued state")
        }
        if Self.finishedHere(episode, pending: pending) {
          violations.append("[\(now)] device \(index) downloads \(episode), which it finished or dismissed")
        }
        if devices[index].online {
          devices[index].downloads.downloadFinished(episode, mediaVersion: version)
        } else {
          devices[index].downloads.downloadInterrupted(episode)
        }
      }
    }
    let next = devices[index].core.nextWakeUp(after: now)
    guard next != devices[index].timerAt else { return }
    devices[index].timerGeneration += 1
    devices[index].timerAt = next
    if let next { happenings.push(.deviceTimer(device: index, generation: devices[index].timerGeneration), at: next) }
  }

  /// The convergence law at a delivered batch: the device holds a projection its user had on the server.
  mutating func checkAgainstHistory(_ index: Int, after what: String) {
    guard let confirmed = devices[index].core.confirmedState else { return }
    if !(history[devices[index].user] ?? []).contains(confirmed) {
      let latest = server.application.snapshot(for: devices[index].user)
      var differences: [String] = []
      if confirmed.queue != latest.queue {
        differences.append("queue \(confirmed.queue.map(\.episode)) vs \(latest.queue.map(\.episode))")
      }
      if confirmed.history != latest.history {
        differences.append("history \(confirmed.history.count) vs \(latest.history.count)")
      }
      if confirmed.meta != latest.meta {
        let keys = Set(confirmed.meta.keys).union(latest.meta.keys).filter { confirmed.meta[$0] != latest.meta[$0] }
        differences.append(
          "meta of \(keys.sorted()): \(keys.sorted().map { "\(String(describing: confirmed.meta[$0]))/\(String(describing: latest.meta[$0]))" })"
        )
      }
      if confirmed.rev != latest.rev { differences.append("rev \(confirmed.rev) vs \(latest.rev)") }
      if confirmed.watermarks != latest.watermarks { differences.append("watermarks") }
      violations.append("[\(now)] device \(index) after \(what): a projection its user never had (now: \(differences))")
    }
  }

  mutating func crash(_ index: Int) {
    for request in devices[index].parked.keys.sorted() {
      if let pollID = devices[index].parked[request] {
        parkedPolls[pollID] = nil
        cancelPoll(pollID)
      }
    }
    var engine = UpdateMachineConfiguration()
    engine.queueLifespan = .seconds(3600)
    devices[index].epoch += 1
    devices[index].outstanding = [:]
    devices[index].parked = [:]
    devices[index].timerAt = nil
    devices[index].timerGeneration += 1
    devices[index].core = Core(
      reducer: EpisodeReducer(),
      configuration: engine,
      random: SeededRandomNumberGenerator(seed: random.next())
    )
    devices[index].downloads.restarted()
    perform(devices[index].core.loaded(devices[index].disk, now: now), on: index)
  }

  // MARK: - What people do

  mutating func listenerActs(_ index: Int) {
    let confirmed = devices[index].core.displayedState ?? EpisodeProjection()
    let known = Array(server.application.catalogIDs.prefix(40))
    guard
      let episode = (confirmed.queue.map(\.episode) + confirmed.history.map(\.episode) + known).randomElement(
        using: &random
      )
    else { return }
    let show = Self.shows.randomElement(using: &random)!
    let placement: Placement = [
      .top, .bottom, .after(confirmed.queue.randomElement(using: &random)?.episode ?? episode),
    ]
    .randomElement(using: &random)!
    let command: EpisodeCommand
    switch Int.random(in: 0..<12, using: &random) {
    case 0: command = .favorite(show)
    case 1: command = .unfavorite(show)
    case 2:
      command = .setSettings(
        EpisodeSettings(n: Int.random(in: 1...4, using: &random), autoAdd: Bool.random(using: &random))
      )
    case 3, 4: command = .fetchNew(shows: nil)
    case 5: command = .enqueue(episode, placement, basis: confirmed.terminal(episode)?.terminalRev)
    case 6: command = .enqueue(episode, placement, basis: (confirmed.terminal(episode)?.terminalRev ?? 1) - 1)
    case 7: command = .move(episode, placement)
    case 8: command = .markFinished(episode, at: now)
    case 9: command = .dismiss(episode, at: now)
    default:
      // A device's clock may be off by minutes either way.
      let skew = Duration.seconds(Int64.random(in: -600...600, using: &random))
      command = .updatePosition(
        episode,
        seconds: Int.random(in: 0...3_600, using: &random),
        at: now.advanced(by: skew),
        device: "d\(index)"
      )
    }
    commands += 1
    let (_, actions) = devices[index].core.submit(command, now: now)
    perform(actions, on: index)
  }

  mutating func broadcasterActs() {
    let catalog = server.application.catalogIDs
    switch Int.random(in: 0..<6, using: &random) {
    case 0, 1, 2:
      publish(show: Self.shows.randomElement(using: &random)!, hoursAgo: Double.random(in: -1...48, using: &random))
    case 3:
      if let episode = catalog.randomElement(using: &random) {
        broadcast(
          .editMeta(
            episode,
            title: "edit \(Int.random(in: 0...99, using: &random))",
            url: "https://m/\(episode)",
            newMedia: chance(0.3)
          )
        )
      }
    case 4:
      if let episode = catalog.randomElement(using: &random) { broadcast(.unpublish(episode)) }
    default:
      if let episode = catalog.randomElement(using: &random), let meta = server.application.meta(of: episode) {
        broadcast(.publish(episode, meta))
      }
    }
    broadcast(.publishDue)
  }

  mutating func publish(show: ShowID, hoursAgo: Double) {
    nextEpisode += 1
    let episode = EpisodeID(rawValue: String(format: "ep%04d", nextEpisode))
    let meta = EpisodeMeta(
      show: show,
      title: "\(show) \(nextEpisode)",
      url: "https://m/\(episode)",
      publishedAt: now.advanced(by: .seconds(-hoursAgo * 3600))
    )
    broadcast(.publish(episode, meta))
  }

  mutating func broadcast(_ command: AdminCommand) {
    commands += 1
    if let count = cluster?.count { serveNode(Int.random(in: 0..<count, using: &random)) }
    do {
      applyServer(try server.handle(.admin(command), from: Self.broadcaster, now: now))
    } catch {
      return
    }
    noteProjections()
  }

  // MARK: - The server

  mutating func serve(_ exchange: Exchange, request: RequestID, from index: Int, losesAnswer: Bool) {
    let user = devices[index].user
    func answer(_ result: Result<[UInt8], TransportError>) {
      let delivered: Result<[UInt8], TransportError> = losesAnswer ? .failure(.connectionFailed("answer lost")) : result
      emit(
        .reachesDevice(device: index, epoch: devices[index].epoch, request: request, answer: delivered),
        after: latency()
      )
    }
    switch exchange {
    case .register:
      let (registration, actions) = server.register(
        user: user,
        eventTypes: nil,
        lifespan: .seconds(3600),
        clientID: devices[index].core.clientID,
        now: now
      )
      applyServer(actions)
      answer(.success(encode(registration)))
    case .poll(let finger, let dontBlock):
      nextPollID += 1
      let pollID = PollID(nextPollID)
      parkedPolls[pollID] = (index, request)
      devices[index].parked[request] = pollID
      if let node = cluster?.current { cluster!.pollNode[pollID] = node }
      applyServer(
        server.poll(
          pollID,
          queueID: finger.queueID,
          user: user,
          lastEventID: finger.lastEventID,
          dontBlock: dontBlock,
          now: now
        )
      )
      if losesAnswer, let pollID = devices[index].parked[request], parkedPolls[pollID] != nil {
        // The connection dropped while parked: the poll ends with no answer.
        parkedPolls[pollID] = nil
        devices[index].parked[request] = nil
        applyServer(server.pollCancelled(pollID, now: now))
        answer(.failure(.connectionFailed("dropped")))
      }
    case .submit(let body):
      do {
        let (receipt, actions) = try server.applyMutation(body, from: user, now: now)
        applyServer(actions)
        noteProjections()
        answer(.success(encode(receipt)))
      } catch {
        noteProjections()
        answer(.failure(.api(error)))
      }
    }
    rescheduleServerTimer()
  }

  mutating func applyServer(_ actions: [Server.Action]) {
    for action in actions {
      guard case .completePoll(let pollID, let outcome) = action,
        let (index, request) = parkedPolls.removeValue(forKey: pollID)
      else { continue }
      devices[index].parked[request] = nil
      cluster?.pollNode[pollID] = nil
      let result: Result<[UInt8], TransportError> =
        switch outcome {
        case .events(let events): .success(encode(EventsReply(events: events, queueID: nil)))
        case .failed(let error): .failure(.api(error))
        case .cancelled: .failure(.connectionFailed("dropped"))
        }
      emit(
        .reachesDevice(device: index, epoch: devices[index].epoch, request: request, answer: result),
        after: latency()
      )
    }
    rescheduleServerTimer()
  }

  /// Schedules an answer that shows the server's state now: held until that state is durable.
  mutating func emit(_ happening: Happening, after delay: Duration) {
    if cluster != nil {
      // A cluster node's turn commits what it decided before anything is answered.
      commitTurn()
      schedule(happening, after: delay)
      return
    }
    let (ready, commit) = durability.emit(happening, after: delay, server: &server)
    if let (happening, delay) = ready { schedule(happening, after: delay) }
    if commit { scheduleCommit() }
  }

  /// Schedules the group commit of the records now pending, and an armed crash just before it.
  mutating func scheduleCommit() {
    schedule(.serverLogCommit, after: ServerDurability<EpisodeServer, Happening>.commitDelay)
    if durability.takeArmedCrash() {
      schedule(.serverCrash, after: ServerDurability<EpisodeServer, Happening>.commitDelay / 2)
    }
  }

  mutating func rescheduleServerTimer() {
    if cluster != nil {
      commitTurn()
      let next = server.nextDeadline
      guard next != cluster!.timerAt[cluster!.current] else { return }
      cluster!.timerAt[cluster!.current] = next
      happenings.push(.nodeTimer(node: cluster!.current), at: next)
      return
    }
    if durability.collect(from: &server) { scheduleCommit() }
    let next = server.nextDeadline
    guard next != serverTimerAt else { return }
    serverTimerAt = next
    happenings.push(.serverTimer, at: next)
  }

  /// The server restarts gracefully (everything durable, a snapshot) or crashes (what is not yet durable is
  /// lost with the answers waiting for it; connections drop); it rebuilds from its snapshot and log.
  mutating func restartServer(crash: Bool) {
    if crash {
      for (pollID, (index, request)) in parkedPolls.sorted(by: { $0.key < $1.key }) {
        devices[index].parked[request] = nil
        parkedPolls[pollID] = nil
        schedule(
          .reachesDevice(
            device: index,
            epoch: devices[index].epoch,
            request: request,
            answer: .failure(.connectionFailed("server crashed"))
          ),
          after: latency()
        )
      }
    } else {
      applyServer(server.connectionsDropped(now: now))
      for (happening, delay) in durability.stop(server: &server) { schedule(happening, after: delay) }
    }
    let lost = durability.crash(
      application: EpisodeServer(admins: [Self.broadcaster]),
      server: &server,
      random: SeededRandomNumberGenerator(seed: random.next()),
      now: now
    )
    for case (.reachesDevice(let index, let epoch, let request, _), let delay) in lost {
      schedule(
        .reachesDevice(device: index, epoch: epoch, request: request, answer: .failure(.connectionFailed("crashed"))),
        after: delay
      )
    }
    noteProjections()
    serverTimerAt = nil
    rescheduleServerTimer()
  }

  // MARK: - A cluster of nodes

  static func emptyNode(
    _ configuration: EventServerConfiguration,
    random: inout SeededRandomNumberGenerator,
    now: Timestamp
  ) -> Server {
    var node = Server(
      application: EpisodeServer(admins: [Self.broadcaster]),
      configuration: configuration,
      random: SeededRandomNumberGenerator(seed: random.next()),
      now: now
    )
    node.startRecording()
    return node
  }

  /// Serves `node` from now on (a request or a timer reached it): it first applies what the others
  /// committed, completing its own parked polls.
  mutating func serveNode(_ node: Int) {
    let (actions, committed) = cluster!.serve(node, served: &server)
    if committed { scheduleFollowers() }
    applyServer(actions)
  }

  /// The served node's turn commits what it recorded; the other nodes follow a few milliseconds later.
  mutating func commitTurn() {
    if cluster!.commit(from: &server) { scheduleFollowers() }
  }

  mutating func scheduleFollowers() {
    for node in 0..<cluster!.count where node != cluster!.current {
      schedule(.nodeFollows(node: node), after: .microseconds(Int64.random(in: 500...5_000, using: &random)))
    }
  }

  /// Cancels a parked poll on the node it is parked on.
  mutating func cancelPoll(_ pollID: PollID) {
    if let node = cluster?.pollNode.removeValue(forKey: pollID) { serveNode(node) }
    applyServer(server.pollCancelled(pollID, now: now))
  }

  /// Kills a cluster node: the polls parked on it fail as dropped connections, and it starts again from
  /// the log.
  mutating func killNode(_ node: Int) {
    serveNode(node)
    for (pollID, (index, request)) in parkedPolls.sorted(by: { $0.key < $1.key })
    where cluster!.pollNode[pollID] == node {
      devices[index].parked[request] = nil
      parkedPolls[pollID] = nil
      schedule(
        .reachesDevice(
          device: index,
          epoch: devices[index].epoch,
          request: request,
          answer: .failure(.connectionFailed("node killed"))
        ),
        after: latency()
      )
    }
    var configuration = EventServerConfiguration()
    configuration.maximumIdleTimeout = .seconds(7 * 24 * 3600)
    let empty = Self.emptyNode(configuration, random: &random, now: startTime)
    cluster!.killServed(&server, rebuiltFrom: empty)
    rescheduleServerTimer()
  }

  mutating func noteProjections() {
    for user in users {
      let projection = server.application.snapshot(for: user)
      if history[user]?.last != projection { history[user, default: []].append(projection) }
    }
  }

  // MARK: - Settling and the end

  var isSettled: Bool {
    if let cluster, !cluster.isCaughtUp || cluster.applied[cluster.current] != cluster.log.count { return false }
    return devices.indices.allSatisfy { index in
      let device = devices[index]
      guard device.online, case .polling(let finger) = device.core.phase, device.core.pendingMutations.isEmpty,
        !device.parked.isEmpty, server.queue(finger.queueID)?.lastEventID == finger.lastEventID
      else { return false }
      return device.core.confirmedState == server.application.snapshot(for: device.user)
    }
  }

  mutating func finalChecks() {
    let application = server.application
    for (index, device) in devices.enumerated() {
      let projection = application.snapshot(for: device.user)
      if device.core.confirmedState != projection { violations.append("device \(index) ended apart from its user") }
      if !device.core.pendingMutations.isEmpty {
        violations.append(
          "device \(index) ended with writes pending (\(device.core.phase), online \(device.online), "
            + "outstanding \(device.outstanding.count), \(device.core.pendingMutations.map { "\($0.id) \($0.mutation) attempts \($0.attempts)" }))"
        )
      }
      for episode in device.downloads.files.keys
      where projection.queued(episode) == nil || projection.meta[episode]?.available != true {
        violations.append("device \(index) keeps a file of \(episode), not queued and available")
      }
      if device.downloads.completedCount.values.contains(where: { $0 > 1 }) {
        violations.append("device \(index) downloaded an episode twice")
      }
    }
    for restoration in application.restorations where restoration.basis < restoration.terminalRev {
      violations.append(
        "\(restoration.user) got \(restoration.episode) back with basis \(restoration.basis) < \(restoration.terminalRev)"
      )
    }
  }

  // MARK: - Randomness and time

  mutating func schedule(_ happening: Happening, after delay: Duration?) {
    guard let delay else { return }
    happenings.push(happening, at: now.advanced(by: delay))
  }

  mutating func chance(_ probability: Double) -> Bool {
    random.chance(probability)
  }

  mutating func exponential(perHour rate: Double) -> Duration? {
    random.waitingTime(perHour: rate)
  }

  mutating func latency() -> Duration {
    random.latency(milliseconds: scenario.faults.latencyMilliseconds)
  }

  func encode(_ reply: some Encodable) -> [UInt8] {
    (try? WireFormat.encodeSuccess(reply)).map { [UInt8]($0) } ?? []
  }
}
