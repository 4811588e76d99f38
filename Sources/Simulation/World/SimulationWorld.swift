import EventProtocol
import EventServer
import Foundation
import UpdateMachine

/// The discrete-event world: users and their devices, a network that delays, fails and partitions, a push
/// service that loses and reorders, the phone's OS, and the durable event server, all over virtual time with
/// random streams every strategy shares. It drives the pure cores directly (the engine's, the outbox's, the
/// server's, and the domain's: the video app's transfer queue), and every request and answer crosses the
/// network as real wire bytes. Generic over the ``SimulatedDomain`` that brings the application.
struct SimulationWorld<Domain: SimulatedDomain> {
  typealias Application = Domain.Application
  typealias Device = SimulatedDevice<Domain>
  typealias Core = Device.Core
  typealias Server = EventServerStateMachine<Application>

  enum Answer {
    case body([UInt8])
    case failure(TransportError)
  }

  /// Indirect: the heap moves events as it sifts, and a boxed event moves as one reference.
  indirect enum Event {
    case requestReachesServer(device: Int, request: RequestID, exchange: Device.Exchange, losesAnswer: Bool)
    case answerReachesDevice(device: Int, request: RequestID, answer: Answer)
    case deviceTimer(device: Int, generation: Int)
    case serverTimer
    case pushReachesDevice(device: Int, payload: [UInt8])
    case appOpens(device: Int, session: Int)
    case appCloses(device: Int, session: Int)
    case record(device: Int, recording: Int)
    /// One of the domain's own happenings.
    case domain(Domain.Happening)
    case pollTick(device: Int)
    case goesOffline(device: Int, until: Timestamp)
    case comesOnline(device: Int)
    case crash(device: Int)
    case armKill(device: Int)
    case backgroundRefresh(device: Int)
    case systemTerminates(device: Int)
    case suspend(device: Int, generation: Int)
    case heldPushReleased(device: Int)
    case serverRestart
    case serverLogCommit
    case serverCrash
    case faultsStop
    case convergenceCheck
    /// A cluster node's timer (heartbeats, sweeps, the application's deadlines).
    case nodeTimer(node: Int)
    /// A cluster node reads what the others committed.
    case nodeFollows(node: Int)
    /// A cluster node looks at the partitions' leases.
    case leaseLook(node: Int)
    /// A killed node of a partitioned cluster is back for the leases.
    case leaseNodeBack(node: Int)
  }

  let scenario: Scenario
  /// The server's restarts and its own generator's seeds.
  var serverRandom: SeededRandomNumberGenerator
  var now: Timestamp
  let start: Timestamp
  var events = DeadlineHeap<Event>()
  var server: Server
  var devices: [Device] = []
  let users: [UserID]
  var faultsOn = true
  var faults: FaultRates
  var parkedPolls: [PollID: (device: Int, request: RequestID, since: Timestamp)] = [:]
  /// Seconds long-polls were held open by the server.
  var parkedPollSeconds = 0.0
  /// Requests that reached the server.
  var requestsServed = 0
  var nextPollID: UInt64 = 0
  var serverTimerAt: Timestamp?
  var installations: [ClientID: Int] = [:]
  /// What the domain keeps for the whole world.
  var domain: Domain.WorldState
  /// Each user's snapshot versions: when the server's snapshot for the user changed, and to what.
  var versions: [UserID: [(time: Timestamp, snapshot: Application.Snapshot)]] = [:]
  /// Per device, the versions not yet shown: (version, time, app open then).
  var unshown: [[(version: Int, time: Timestamp, open: Bool)]] = []
  var foregroundStaleness: [Double] = []
  var backgroundStaleness: [Double] = []
  /// Wrong statuses that began while the user looked (the server moved on): how long each lasted on screen.
  var wrongWhileOpen: [Double] = []
  /// Wrong statuses shown when the app opened: how long each lasted on screen.
  var wrongAfterOpening: [Double] = []
  var pushesSent = 0
  var violations: [String] = []
  /// Pages of history merged into a device's state.
  var pagesMerged = 0
  /// Batches of events devices applied from polls (each checked against the versions its user had).
  var batchesApplied = 0
  var timeline: [String] = []
  var trace: [String] = []
  var lostPushSince: [Int: Timestamp] = [:]
  var settledAt: Timestamp?
  var finished = false
  /// The server's storage, and the answers and pushes waiting for their records to be durable.
  var durability = ServerDurability<Application, Event>()
  /// With several nodes: the cluster (``server`` is the node being served), and its draws.
  var cluster: SimulatedCluster<Application>?
  var clusterRandom: SeededRandomNumberGenerator
  /// With several nodes and partitions: which node serves each partition.
  var leases: SimulatedLeases?

  /// A world for `scenario`, the domain's world state as given.
  init(scenario: Scenario, domain: Domain.WorldState) {
    self.scenario = scenario
    self.faults = scenario.faults
    var serverRandom = RandomStream.server.generator(seed: scenario.seed)
    let start = Timestamp(secondsSinceEpoch: 1_700_000_000)
    self.start = start
    self.now = start
    self.domain = domain
    self.server = Self.emptyNode(in: domain, random: &serverRandom, now: start)
    self.users = (0..<max(scenario.users, 1)).map { UserID("user\($0 + 1)") }
    self.serverRandom = serverRandom
    self.clusterRandom = RandomStream.nodes.generator(seed: scenario.seed)
    if scenario.nodes > 1 {
      var nodes = [server]
      for _ in 1..<scenario.nodes { nodes.append(Self.emptyNode(in: domain, random: &self.serverRandom, now: start)) }
      cluster = SimulatedCluster(nodes: nodes)
      if let count = scenario.partitions, let map = PartitionMap(count: count) {
        leases = SimulatedLeases(partitions: map, nodes: scenario.nodes)
      }
    }
    for (number, user) in users.enumerated() {
      versions[user] = [(start, Domain.wholePart(of: server.application.snapshot(for: user)))]
      for _ in 0..<max(Domain.deviceCount(ofUser: number, in: domain, scenario: scenario), 1) {
        addDevice(for: user)
      }
    }
  }

  // MARK: - Running

  /// Runs the scenario: faults for its duration, then settling until converged or the limit.
  mutating func run() -> SimulationReport {
    for index in devices.indices {
      startDevice(index)
      scheduleScript(of: index)
    }
    let end = start.advanced(by: scenario.duration)
    for moment in DeviceScript.moments(
      perHour: faults.serverRestartsPerHour,
      from: start,
      to: end,
      using: &serverRandom
    ) {
      events.push(.serverRestart, at: moment)
    }
    Domain.worldStarts(in: &self)
    scheduleServerTimer()
    scheduleFirstLeaseLooks()
    schedule(.faultsStop, after: scenario.duration)
    let deadline = start.advanced(by: scenario.duration).advanced(by: scenario.settleLimit)
    var eventsAtThisTime = 0
    while !finished, let next = events.nextTime, next <= deadline {
      let (time, event) = events.pop()!
      eventsAtThisTime = time == now ? eventsAtThisTime + 1 : 0
      guard eventsAtThisTime < 100_000 else {
        violations.append("livelock: 100,000 steps at \(clockText(now)) without time moving")
        break
      }
      sample(until: time)
      now = time
      handle(event)
    }
    sample(until: now)
    Domain.finalChecks(in: &self)
    return report()
  }

  mutating func handle(_ event: Event) {
    // A device timer due now whose happening has not run yet goes first, as in the engine's shell: an input
    // would otherwise compute the next wake-up after `now` and leave the due work out.
    switch event {
    case .answerReachesDevice(let device, _, _), .pushReachesDevice(let device, _), .appOpens(let device, _),
      .appCloses(let device, _), .record(let device, _), .pollTick(let device),
      .goesOffline(let device, _), .comesOnline(let device):
      fireDueTimer(device)
    case .domain(let happening):
      if let device = Domain.device(of: happening) { fireDueTimer(device) }
    default:
      break
    }
    switch event {
    case .requestReachesServer(let device, let request, let exchange, let losesAnswer):
      requestReachesServer(device, request, exchange, losesAnswer: losesAnswer)
    case .answerReachesDevice(let device, let request, let answer):
      answerReachesDevice(device, request, answer)
    case .deviceTimer(let device, let generation):
      deviceTimerFired(device, generation: generation)
    case .serverTimer:
      serverTimerAt = nil
      serverTimerFired()
    case .nodeTimer(let node):
      guard let due = cluster!.timerAt[node], due <= now else { return }
      cluster!.timerAt[node] = nil
      serveNode(node)
      serverTimerFired()
    case .nodeFollows(let node):
      serveNode(node)
    case .leaseLook(let node):
      leaseLook(by: node)
    case .leaseNodeBack(let node):
      leaseNodeBack(node)
    case .serverRestart where cluster != nil:
      guard faultsOn else { return }
      killNode(Int.random(in: 0..<cluster!.count, using: &clusterRandom))
    case .pushReachesDevice(let device, let payload):
      pushReachesDevice(device, payload)
    case .appOpens(let device, let session): appOpens(device, session: session)
    case .appCloses(let device, let session): appCloses(device, session: session)
    case .record(let device, let recording): userActs(device, recording)
    case .domain(let happening): Domain.handle(happening, in: &self)
    case .pollTick(let device): pollTick(device)
    case .goesOffline(let device, let until): goesOffline(device, until: until)
    case .comesOnline(let device): comesOnline(device)
    case .crash(let device):
      guard faultsOn else { return }
      crash(device)
    case .armKill(let device):
      if faultsOn { devices[device].killArmed = true }
    case .backgroundRefresh(let device): backgroundRefresh(device)
    case .systemTerminates(let device): systemTerminates(device)
    case .suspend(let device, let generation): suspend(device, generation: generation)
    case .heldPushReleased(let device): releaseHeldPush(device)
    case .serverRestart:
      guard faultsOn else { return }
      // A crash strikes at the worst moment: while records wait for their group commit.
      if serverRandom.chance(faults.restartIsCrash) {
        durability.isCrashArmed = true
      } else {
        restartServer(crash: false)
      }
    case .serverCrash:
      guard faultsOn else { return }
      restartServer(crash: true)
    case .serverLogCommit:
      for (event, delay) in durability.commit(server: &server) { schedule(event, after: delay) }
      Domain.serverCommitted(in: &self)
    case .faultsStop: stopFaults()
    case .convergenceCheck:
      if isConverged {
        settledAt = now
        finished = true
      } else {
        schedule(.convergenceCheck, after: .seconds(10))
      }
    }
  }

  // MARK: - Scheduling and randomness

  mutating func schedule(_ event: Event, after delay: Duration?) {
    guard let delay else { return }
    events.push(event, at: now.advanced(by: delay))
  }

  /// A draw of device `index`'s request stream: true with probability `probability`.
  mutating func chance(_ probability: Double, device index: Int) -> Bool {
    devices[index].requestRandom.chance(probability)
  }

  /// A one-way latency for device `index`.
  mutating func latency(device index: Int) -> Duration {
    devices[index].requestRandom.latency(milliseconds: faults.latencyMilliseconds)
  }

  mutating func note(_ line: String) {
    timeline.append("[\(clockText(now))] \(line)")
  }

  mutating func traceLine(_ line: @autoclosure () -> String) {
    if scenario.keepsFullTrace { trace.append("[\(clockText(now))] \(line())") }
  }

  func clockText(_ time: Timestamp) -> String {
    let seconds = Int(start.duration(to: time).inSeconds)
    return String(format: "%02d:%02d:%02d", seconds / 3600, seconds / 60 % 60, seconds % 60)
  }

  // MARK: - The network and the server

  /// Bytes of HTTP overhead counted with each request and each answer.
  static var overheadBytes: Int { 150 }

  mutating func send(_ exchange: Device.Exchange, as request: RequestID, from index: Int) {
    devices[index].outstanding[request] = exchange
    devices[index].requests += 1
    devices[index].bytes += Self.overheadBytes + requestBodySize(exchange)
    traceLine("device \(index) sends \(request) \(exchange)")
    if !devices[index].online || (faultsOn && chance(faults.requestFailure / 2, device: index)) {
      schedule(
        .answerReachesDevice(device: index, request: request, answer: .failure(.connectionFailed())),
        after: latency(device: index)
      )
      return
    }
    if faultsOn && chance(faults.neverAnswer, device: index) { return }
    let losesAnswer = faultsOn && chance(faults.requestFailure / 2, device: index)
    schedule(
      .requestReachesServer(device: index, request: request, exchange: exchange, losesAnswer: losesAnswer),
      after: latency(device: index)
    )
  }

  func requestBodySize(_ exchange: Device.Exchange) -> Int {
    switch exchange {
    case .register: 80
    case .poll: 90
    case .submit(let body): ((try? WireFormat.encode(body))?.count ?? 100)
    case .fetch: 140
    }
  }

  mutating func requestReachesServer(
    _ index: Int,
    _ request: RequestID,
    _ exchange: Device.Exchange,
    losesAnswer: Bool
  ) {
    let user = devices[index].user
    requestsServed += 1
    guard serveNode(for: user) else {
      // The user's partition is moving: no node serves it until one takes its lease.
      reply(to: index, request, .failure(.serverError(status: 503)))
      return
    }
    if faultsOn && chance(faults.serverError, device: index) {
      reply(to: index, request, .failure(.serverError(status: 503)))
      return
    }
    switch exchange {
    case .register:
      let clientID = devices[index].clientID!
      let (registration, actions) = server.register(
        user: user,
        eventTypes: nil,
        lifespan: scenario.queueLifespan,
        clientID: clientID,
        now: now
      )
      installations[clientID] = index
      applyServer(actions)
      reply(to: index, request, losesAnswer ? .failure(.connectionFailed("answer lost")) : .body(encode(registration)))
    case .poll(let finger, let dontBlock, let limit):
      guard devices[index].outstanding[request] != nil else { return }
      let pollID = PollID(nextPollID)
      nextPollID += 1
      parkedPolls[pollID] = (index, request, now)
      devices[index].parked[request] = pollID
      if let node = cluster?.current { cluster!.pollNode[pollID] = node }
      applyServer(
        server.poll(
          pollID,
          queueID: finger.queueID,
          user: user,
          lastEventID: finger.lastEventID,
          dontBlock: dontBlock,
          limit: limit,
          now: now
        )
      )
    case .submit(let body):
      // The batch is decided one mutation at a time, in order, as the server's batch does it in one turn: so
      // the checker records every state the server passes through (a device may apply the events of the
      // first writes before those of the rest). The batch entry point itself is held by
      // `MutationBatchTests` and the loopback world.
      var outcomes: [MutationOutcome] = []
      do {
        for mutation in body.requests {
          let (decided, actions) = try server.applyMutations(
            MutationBatch(requests: [mutation]),
            from: user,
            now: now
          )
          applyServer(actions)
          recordVersions()
          outcomes += decided
          if case .refused(_, let error) = decided.first, error.code == .mutationIDReused { break }
        }
        reply(
          to: index,
          request,
          losesAnswer
            ? .failure(.connectionFailed("answer lost"))
            : .body(encode(SuccessBody(MutationBatchReply(outcomes: outcomes))))
        )
      } catch {
        reply(to: index, request, .body(encode(error)))
      }
      recordVersions()
    case .fetch(let body, let queueID):
      do {
        let answer = try server.fetch(body, queueID: queueID, user: user, now: now)
        reply(to: index, request, losesAnswer ? .failure(.connectionFailed("answer lost")) : .body(encode(answer)))
      } catch {
        reply(to: index, request, .body(encode(error)))
      }
    }
    scheduleServerTimer()
  }

  mutating func reply(to index: Int, _ request: RequestID, _ answer: Answer) {
    if case .body(let bytes) = answer { devices[index].bytes += Self.overheadBytes + bytes.count }
    emit(.answerReachesDevice(device: index, request: request, answer: answer), after: latency(device: index))
  }

  func encode(_ value: some Encodable) -> [UInt8] {
    (try? WireFormat.encodeBytes(value)) ?? []
  }

  /// Performs the server's actions: answers parked polls, sends pushes through the lossy push service.
  mutating func applyServer(_ actions: [Server.Action]) {
    for action in actions {
      switch action {
      case .completePoll(let pollID, let outcome):
        guard let (index, request, since) = parkedPolls.removeValue(forKey: pollID) else { continue }
        cluster?.pollNode[pollID] = nil
        parkedPollSeconds += since.duration(to: now).inSeconds
        devices[index].parked[request] = nil
        switch outcome {
        case .events(let events): reply(to: index, request, .body(encode(EventsReply(events: events, queueID: nil))))
        case .failed(let error): reply(to: index, request, .body(encode(error)))
        case .cancelled: reply(to: index, request, .failure(.connectionFailed("dropped")))
        }
      case .sendPush(let push):
        guard scenario.strategy.usesPushes, let index = installations[push.installation.clientID] else { continue }
        pushesSent += 1
        if faultsOn && devices[index].pushRandom.chance(faults.pushLoss) {
          devices[index].pushesLost += 1
          if lostPushSince[index] == nil { lostPushSince[index] = now }
          traceLine("push to device \(index) lost")
          continue
        }
        let copies = faultsOn && devices[index].pushRandom.chance(faults.pushDuplicate) ? 2 : 1
        for _ in 0..<copies {
          let delay =
            faultsOn && devices[index].pushRandom.chance(faults.pushLate)
            ? .seconds(Int.random(in: 1...60, using: &devices[index].pushRandom))
            : devices[index].pushRandom.latency(milliseconds: faults.latencyMilliseconds)
          emit(.pushReachesDevice(device: index, payload: push.payload), after: delay)
        }
      }
    }
    scheduleServerTimer()
  }

  /// Schedules an answer or a push that shows the server's state now: held until that state is durable.
  mutating func emit(_ event: Event, after delay: Duration) {
    if cluster != nil {
      // A cluster node's turn commits what it decided to the shared log before anything is answered.
      commitTurn()
      schedule(event, after: delay)
      return
    }
    let (ready, commit) = durability.emit(event, after: delay, server: &server)
    if let (event, delay) = ready { schedule(event, after: delay) }
    if commit { scheduleCommit() }
  }

  /// Schedules the group commit of the records now pending, and an armed crash just before it.
  mutating func scheduleCommit() {
    schedule(.serverLogCommit, after: ServerDurability<Application, Event>.commitDelay)
    if durability.takeArmedCrash() {
      schedule(.serverCrash, after: ServerDurability<Application, Event>.commitDelay / 2)
    }
  }

  mutating func scheduleServerTimer() {
    if cluster != nil {
      scheduleNodeTimer()
      return
    }
    if durability.collect(from: &server) { scheduleCommit() }
    let deadline = server.nextDeadline
    guard deadline != serverTimerAt else { return }
    serverTimerAt = deadline
    events.push(.serverTimer, at: max(deadline, now))
  }

  /// Records a new snapshot version for every user whose snapshot changed.
  mutating func recordVersions() {
    for user in users {
      let snapshot = Domain.wholePart(of: server.application.snapshot(for: user))
      guard versions[user]!.last!.snapshot != snapshot else { continue }
      versions[user]!.append((now, snapshot))
      let version = versions[user]!.count - 1
      for index in devices.indices where devices[index].user == user {
        unshown[index].append((version, now, devices[index].appOpen))
        devices[index].behindIsStale = true
      }
    }
  }

  /// The connections of the parked polls `isDropped` picks break (their server died): each poll fails on its
  /// device as a dropped connection, in poll order.
  mutating func dropParkedPolls(because reason: String, where isDropped: (PollID) -> Bool) {
    for (pollID, (index, request, since)) in parkedPolls.sorted(by: { $0.key < $1.key }) where isDropped(pollID) {
      parkedPollSeconds += since.duration(to: now).inSeconds
      devices[index].parked[request] = nil
      parkedPolls[pollID] = nil
      schedule(
        .answerReachesDevice(device: index, request: request, answer: .failure(.connectionFailed(reason))),
        after: latency(device: index)
      )
    }
  }

  /// The server restarts: gracefully (parked polls answered, everything durable, a snapshot), or by a
  /// crash (what is not yet durable is lost, with the answers and pushes waiting for it; connections drop).
  /// Either way the new process rebuilds from its snapshot and log.
  mutating func restartServer(crash: Bool) {
    note(crash ? "the server crashes: what is not yet durable is lost" : "the server restarts")
    if crash {
      dropParkedPolls(because: "server crashed") { _ in true }
    } else {
      applyServer(server.connectionsDropped(now: now))
      for (event, delay) in durability.stop(server: &server) { schedule(event, after: delay) }
    }
    let lost = durability.crash(
      application: Domain.makeApplication(in: domain),
      server: &server,
      random: SeededRandomNumberGenerator(seed: serverRandom.next()),
      now: now
    )
    for case (.answerReachesDevice(let index, let request, _), let delay) in lost {
      schedule(
        .answerReachesDevice(device: index, request: request, answer: .failure(.connectionFailed("server crashed"))),
        after: delay
      )
    }
    serverTimerAt = nil
    scheduleServerTimer()
  }
}

/// A success body carrying a reply's fields beside `result` and `msg`.
struct SuccessBody<Reply: Codable>: Codable {
  var reply: Reply

  init(_ reply: Reply) {
    self.reply = reply
  }

  private enum CodingKeys: String, CodingKey {
    case result
    case message = "msg"
  }

  init(from decoder: any Decoder) throws {
    reply = try Reply(from: decoder)
  }

  func encode(to encoder: any Encoder) throws {
    try reply.encode(to: encoder)
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("success", forKey: .result)
    try container.encode("", forKey: .message)
  }
}
