import EventProtocol
import EventServer
import Foundation
import UpdateMachine

/// A deterministic world in which update-machine cores talk to an event-server core, with no threads and
/// no real time: every request, answer, failure, crash and tick is a step the world (or the test) takes.
/// One seed drives every choice, so a run replays exactly.
///
/// Use it to test a reducer and a server application together: submit writes, run commands on the
/// server, throw faults at the devices (``chaoticStep()``), then ``runUntilSettled(maximumSteps:)`` checks
/// that every device converges to the server's snapshot for its user with an empty outbox.
///
/// ```swift
/// var world = LoopbackWorld(application: NoteBoard(), reducer: { NotesReducer(user: $0) },
///                           devices: ["alice", "bob"], seed: 42)
/// world.submit(.post("hi", to: ["bob"]), on: 0)
/// for _ in 0..<200 { world.chaoticStep() }
/// #expect(world.runUntilSettled(maximumSteps: 2_000))
/// ```
public struct LoopbackWorld<Application: ServerApplication, Reducer: UpdateReducer>
where
  Reducer.State == Application.Snapshot, Reducer.Event == Application.Event,
  Reducer.Mutation == Application.Command, Application.Command: Equatable, Application: Codable
{
  /// A device's engine.
  public typealias Core = UpdateMachineCore<Reducer.State, Reducer.Event, Reducer.Mutation>
  /// The server's core.
  public typealias Server = EventServerStateMachine<Application>

  /// One installation of the app.
  public struct Device {
    /// The user it is signed in as.
    public let user: UserID
    /// Its engine's pure core.
    public internal(set) var core: Core
    /// Its persisted bytes.
    public internal(set) var disk: Data?
    /// How many times it crashed and restarted.
    public internal(set) var restarts = 0
  }

  /// Which faults ``chaoticStep()`` may throw, as percentages.
  public struct Faults: Sendable, Hashable {
    /// Chance (%) that a device crashes before performing any one action.
    public var crashBeforeAction = 2
    /// Chance (%) that a save fails (disk full).
    public var saveFailure = 3
    /// Whether requests fail (before the server, while parked, or by a lost answer).
    public var requestFailures = true
    /// Whether the server restarts (from its dump) now and then.
    public var serverRestarts = true
    /// Whether apps go to the background and back, and get pushes.
    public var lifecycle = true
    /// Chance (%) that only a prefix of a batch of several writes reaches the server, as when a transport
    /// cuts a batch to its size limit or the server has no batch route: the rest must go in the next.
    public var batchCut = 25

    /// Every fault on.
    public init() {}

    /// No fault at all.
    public static var none: Faults {
      var faults = Faults()
      faults.crashBeforeAction = 0
      faults.saveFailure = 0
      faults.requestFailures = false
      faults.serverRestarts = false
      faults.lifecycle = false
      faults.batchCut = 0
      return faults
    }
  }

  private enum Exchange {
    case register(ClientID)
    case poll(EventFinger, dontBlock: Bool, limit: Int?)
    case submit(MutationBatch<Application.Command>)
    case fetch(FetchRequest, QueueID)
  }

  private enum Answer {
    case registered(Registration<Application.Snapshot>)
    case events([EventEnvelope<Application.Event>])
    case outcomes([MutationOutcome])
    case fetched(FetchAnswer<Application.FetchedItem>)
    case failed(TransportError)
  }

  private enum Progress {
    case toServer
    case parked(PollID)
    case answered(Answer)
  }

  private struct Outstanding {
    var device: Int
    var request: RequestID
    var exchange: Exchange
    var progress: Progress
    /// The log position the answer needs durable before it may leave the server.
    var needs: UInt64 = 0
  }

  /// The server's core.
  public private(set) var server: Server
  /// The server's durable storage: what a crash keeps (answers leave only once it holds what they show).
  public private(set) var storage = SimulatedServerStorage<Application>()
  private let initialApplication: Application
  /// The devices.
  public private(set) var devices: [Device]
  /// The world's time.
  public private(set) var now: Timestamp
  /// What happened, one line a step, for a failing test's report.
  public private(set) var trace: [String] = []
  /// The faults ``chaoticStep()`` may throw; ``runUntilSettled(maximumSteps:)`` turns them all off.
  public var faults: Faults

  private var random: SeededRandomNumberGenerator
  /// Draws the batch cuts apart from `random`, so the fault leaves every other draw as it was.
  private var batchCuts: SeededRandomNumberGenerator
  private let makeReducer: @Sendable (UserID) -> Reducer
  private let configuration: UpdateMachineConfiguration
  private var outstanding: [Outstanding] = []
  private var nextPollID: UInt64 = 0

  /// Creates a world with one device per entry of `devices` (a user may have several), all started.
  /// - Parameters:
  ///   - application: The server application.
  ///   - reducer: Makes the reducer of a device signed in as the user.
  ///   - users: The user of each device.
  ///   - seed: Drives every choice.
  ///   - configuration: The devices' engine configuration.
  ///   - faults: What ``chaoticStep()`` may do.
  ///   - serverConfiguration: The server's limits and timings.
  public init(
    application: Application,
    reducer: @escaping @Sendable (UserID) -> Reducer,
    devices users: [UserID],
    seed: UInt64,
    configuration: UpdateMachineConfiguration = .init(),
    faults: Faults = .init(),
    serverConfiguration: EventServerConfiguration = .init()
  ) {
    let start = Timestamp(secondsSinceEpoch: 1_700_000_000)
    var random = SeededRandomNumberGenerator(seed: seed)
    self.batchCuts = SeededRandomNumberGenerator(seed: seed ^ 0x6261_7463_6863_7574)
    self.now = start
    self.server = Server(
      application: application,
      configuration: serverConfiguration,
      random: SeededRandomNumberGenerator(seed: random.next()),
      now: start
    )
    self.server.startRecording()
    self.initialApplication = application
    self.makeReducer = reducer
    self.configuration = configuration
    self.faults = faults
    self.devices = users.map { user in
      Device(
        user: user,
        core: Core(
          reducer: reducer(user),
          configuration: configuration,
          random: SeededRandomNumberGenerator(seed: random.next())
        )
      )
    }
    self.random = random
    for index in devices.indices {
      perform(devices[index].core.loaded(nil, now: now), on: index)
    }
  }

  // MARK: - What the app and the server do

  /// The app on device `index` submits a write.
  @discardableResult
  public mutating func submit(_ mutation: Application.Command, on index: Int) -> MutationID {
    let (id, actions) = devices[index].core.submit(mutation, now: now)
    trace.append("\(now) device \(index) submits \(id)")
    perform(actions, on: index)
    return id
  }

  /// Device `index`'s app asks for a page of partial state; how it ends shows in ``fetchOutcomes``.
  /// - Returns: The fetch's request id.
  @discardableResult
  public mutating func fetch(_ request: FetchRequest, on index: Int) -> RequestID {
    let (id, actions) = devices[index].core.fetch(request, now: now)
    trace.append("\(now) device \(index) fetches \(request) as \(id)")
    perform(actions, on: index)
    return id
  }

  /// How each fetch asked with ``fetch(_:on:)`` ended, by device and request id.
  public private(set) var fetchOutcomes: [Int: [RequestID: FetchOutcome]] = [:]

  /// The server runs a command from `user` (not through any outbox).
  /// - Throws: The application's refusal.
  public mutating func serverCommand(_ command: Application.Command, from user: UserID) throws(EventAPIError) {
    let actions = try server.handle(command, from: user, now: now)
    storage.collect(from: &server)
    storage.flush()
    trace.append("\(now) server runs a command from \(user)")
    applyServer(actions)
  }

  /// Device `index` goes to the background or comes to the foreground.
  public mutating func setLifecycle(_ lifecycle: AppLifecycle, on index: Int) {
    guard devices[index].core.lifecycle != lifecycle else { return }
    trace.append("\(now) device \(index) goes to the \(lifecycle)")
    let actions =
      lifecycle == .background
      ? devices[index].core.enteredBackground(now: now) : devices[index].core.enteredForeground(now: now)
    perform(actions, on: index)
  }

  /// Device `index` is killed and restarted from its persisted bytes.
  public mutating func crash(_ index: Int) {
    for exchange in outstanding where exchange.device == index { dropExchange(exchange.request, on: index) }
    let user = devices[index].user
    var core = Core(
      reducer: makeReducer(user),
      configuration: configuration,
      lifecycle: Bool.random(using: &random) ? .foreground : .background,
      random: SeededRandomNumberGenerator(seed: random.next())
    )
    var record: PersistedRecord<Reducer.State, Reducer.Mutation>?
    var recovery: [StoreRecovery] = []
    if let disk = devices[index].disk {
      let restoration = PersistedRecord<Reducer.State, Reducer.Mutation>.restore(from: disk, for: makeReducer(user))
      record = restoration.record
      recovery = restoration.notes
    }
    trace.append("\(now) device \(index) restarts from \(record?.finger.map(\.description) ?? "no finger")")
    let actions = core.loaded(record, recovery: recovery, now: now)
    devices[index].core = core
    devices[index].restarts += 1
    perform(actions, on: index)
  }

  /// The server restarts gracefully: parked polls are answered (dropped), a snapshot is written, and the
  /// new process starts from it.
  public mutating func restartServer() {
    trace.append("\(now) server restarts")
    applyServer(server.connectionsDropped(now: now))
    storage.snapshot(of: &server)
    rebuildServer()
  }

  /// The server is killed (SIGKILL, power cut): every record not yet durable is lost, with the answers that
  /// were waiting for it; parked polls lose their connection. The new process rebuilds from the snapshot
  /// and the durable records.
  public mutating func crashServer() {
    trace.append("\(now) server crashes: records after \(storage.durablePosition) are lost")
    for index in outstanding.indices {
      switch outstanding[index].progress {
      case .toServer: continue
      case .parked: break
      case .answered: if outstanding[index].needs <= storage.durablePosition { continue }
      }
      outstanding[index].progress = .answered(.failed(.connectionFailed("the server crashed")))
      outstanding[index].needs = 0
    }
    rebuildServer()
  }

  private mutating func rebuildServer() {
    let application = initialApplication
    let configuration = server.configuration
    let random = SeededRandomNumberGenerator(seed: random.next())
    do {
      server = try storage.crashed(
        application: application,
        configuration: configuration,
        random: random,
        now: now
      )
    } catch {
      preconditionFailure("the server's own log did not replay: \(error)")
    }
    storage.collect(from: &server)
  }

  /// Moves time to `time` (never back) and fires every timer that is due.
  public mutating func advance(to time: Timestamp) {
    now = max(now, time)
    applyServer(server.timerFired(now: now))
    for index in devices.indices { perform(devices[index].core.timerFired(now: now), on: index) }
  }

  // MARK: - Steps

  /// One random step: deliver a request or an answer, fail one, let time pass, change an app's lifecycle,
  /// push, crash a device, or restart the server, as ``faults`` allows.
  public mutating func chaoticStep() {
    let roll = Int.random(in: 0..<100, using: &random)
    switch roll {
    case 0..<30:
      let candidates = outstanding.filter { if case .toServer = $0.progress { true } else { false } }
      if let exchange = candidates.randomElement(using: &random) {
        deliverToServer(exchange.request, on: exchange.device)
      }
    case 30..<58:
      let candidates = outstanding.filter { if case .answered = $0.progress { true } else { false } }
      if let exchange = candidates.randomElement(using: &random) {
        deliverToClient(exchange.request, on: exchange.device)
      }
    case 58..<66 where faults.requestFailures:
      if let exchange = outstanding.randomElement(using: &random) { failRequest(exchange.request, on: exchange.device) }
    case 66..<80:
      let step: Duration = [
        .milliseconds(50), .milliseconds(400), .seconds(2), .seconds(30), .seconds(61), .seconds(700),
      ]
      .randomElement(using: &random)!
      trace.append("\(now) time passes: \(step)")
      advance(to: now.advanced(by: step))
      if step >= .seconds(61) { storage.snapshot(of: &server) }
    case 80..<88 where faults.lifecycle:
      let index = Int.random(in: devices.indices, using: &random)
      if Bool.random(using: &random) {
        setLifecycle(devices[index].core.lifecycle == .foreground ? .background : .foreground, on: index)
      } else {
        let finger = devices[index].core.phase.finger
        let latest = finger.flatMap { server.queue($0.queueID)?.lastEventID }
        let hint = Core.PushHint(queueID: finger?.queueID, lastEventID: Bool.random(using: &random) ? latest : nil)
        trace.append("\(now) device \(index) gets a push \(hint)")
        perform(devices[index].core.pushReceived(hint, now: now), on: index)
      }
    case 88..<93 where faults.crashBeforeAction > 0:
      crash(Int.random(in: devices.indices, using: &random))
    case 93 where faults.serverRestarts:
      restartServer()
    case 94 where faults.serverRestarts:
      crashServer()
    default:
      break
    }
  }

  /// Turns every fault off, brings every app to the foreground, and delivers everything (moving time only
  /// when nothing else can happen) until every device has converged.
  /// - Returns: Whether every device converged within `maximumSteps`.
  public mutating func runUntilSettled(maximumSteps: Int) -> Bool {
    faults = .none
    trace.append("\(now) --- faults stop ---")
    for index in devices.indices { setLifecycle(.foreground, on: index) }
    for _ in 0..<maximumSteps {
      if isSettled { return true }
      if let exchange = outstanding.first(where: { if case .answered = $0.progress { true } else { false } }) {
        deliverToClient(exchange.request, on: exchange.device)
      } else if let exchange = outstanding.first(where: { if case .toServer = $0.progress { true } else { false } }) {
        deliverToServer(exchange.request, on: exchange.device)
      } else {
        let wakeUps = devices.compactMap { $0.core.nextWakeUp(after: now) } + [server.nextDeadline]
        advance(to: wakeUps.min() ?? now.advanced(by: .seconds(1)))
      }
    }
    return isSettled
  }

  /// Whether every device is long-polling at the end of its queue with an empty outbox and no fetch open,
  /// showing exactly the server's snapshot for its user (for partial state: its whole part, and a partial
  /// part whose every claim is true of the server).
  public var isSettled: Bool {
    devices.indices.allSatisfy(isSettled(_:))
  }

  /// Like ``runUntilSettled(maximumSteps:)`` for the devices `online` only: the others are offline (their
  /// requests are never delivered, and time passes for them too). Faults stop.
  /// - Returns: Whether the online devices settled.
  public mutating func runUntilSettled(online: Set<Int>, maximumSteps: Int) -> Bool {
    faults = .none
    trace.append("\(now) --- faults stop; online: \(online.sorted()) ---")
    for index in online { setLifecycle(.foreground, on: index) }
    for _ in 0..<maximumSteps {
      if online.allSatisfy(isSettled(_:)) { return true }
      let mine = outstanding.filter { online.contains($0.device) }
      if let exchange = mine.first(where: { if case .answered = $0.progress { true } else { false } }) {
        deliverToClient(exchange.request, on: exchange.device)
      } else if let exchange = mine.first(where: { if case .toServer = $0.progress { true } else { false } }) {
        deliverToServer(exchange.request, on: exchange.device)
      } else {
        let wakeUps = online.compactMap { devices[$0].core.nextWakeUp(after: now) } + [server.nextDeadline]
        advance(to: wakeUps.min() ?? now.advanced(by: .seconds(1)))
      }
    }
    return online.allSatisfy(isSettled(_:))
  }

  /// Whether device `index` has converged (see ``isSettled``).
  public func isSettled(_ index: Int) -> Bool {
    let device = devices[index]
    guard case .polling(let finger) = device.core.phase, device.core.pendingMutations.isEmpty,
      let queue = server.queue(finger.queueID), queue.lastEventID == finger.lastEventID,
      outstanding.contains(where: { $0.device == index })
    else { return false }
    guard let confirmed = device.core.confirmedState, device.core.displayedState == confirmed,
      !device.core.hasOpenFetches
    else { return false }
    let snapshot = server.application.snapshot(for: device.user)
    let reducer = makeReducer(device.user)
    if let partial = reducer as? any PartialUpdateReducer {
      return agrees(confirmed, with: snapshot, of: device.user, partsOf: partial)
    }
    return confirmed == snapshot
  }

  /// For a reducer holding partial state: the whole part equals the server's snapshot, and everything the
  /// partial part claims is true of the server (``PartialStateCheck``).
  private func agrees<Partial: PartialUpdateReducer>(
    _ confirmed: Reducer.State,
    with snapshot: Reducer.State,
    of user: UserID,
    partsOf reducer: Partial
  ) -> Bool {
    guard var client = confirmed as? Partial.State, let server = snapshot as? Partial.State else { return false }
    let partial = client[keyPath: reducer.partialState]
    client[keyPath: reducer.partialState] = server[keyPath: reducer.partialState]
    guard client == server else { return false }
    let application = self.server.application
    return PartialStateCheck.problems(in: partial) { request in
      (try? application.fetch(request, for: user)) as? FetchPage<Partial.Item>
    }.isEmpty
  }

  // MARK: - Performing a device's actions

  private mutating func perform(_ initial: [Core.Action], on index: Int) {
    var actions = initial
    var position = 0
    while position < actions.count {
      let action = actions[position]
      position += 1
      if faults.crashBeforeAction > 0, Int.random(in: 0..<100, using: &random) < faults.crashBeforeAction {
        trace.append("\(now) device \(index) crashes before \(action)")
        crash(index)
        return
      }
      switch action {
      case .register(let request, _, _, let clientID):
        outstanding.append(
          Outstanding(device: index, request: request, exchange: .register(clientID), progress: .toServer)
        )
      case .poll(let request, let finger, let dontBlock, _):
        outstanding.append(
          Outstanding(
            device: index,
            request: request,
            exchange: .poll(finger, dontBlock: dontBlock, limit: devices[index].core.pollBatchLimit),
            progress: .toServer
          )
        )
      case .submit(let request, let body, _):
        outstanding.append(Outstanding(device: index, request: request, exchange: .submit(body), progress: .toServer))
      case .fetch(let request, let body, let queueID, _):
        outstanding.append(
          Outstanding(device: index, request: request, exchange: .fetch(body, queueID), progress: .toServer)
        )
      case .fetchFinished(let request, let outcome):
        trace.append("\(now) device \(index) fetch \(request) ends: \(outcome)")
        fetchOutcomes[index, default: [:]][request] = outcome
      case .cancel(let request):
        dropExchange(request, on: index)
      case .persist(let record, _):
        if faults.saveFailure > 0, Int.random(in: 0..<100, using: &random) < faults.saveFailure {
          trace.append("\(now) device \(index) fails to save")
          actions += devices[index].core.persistFailed(.writeFailed("disk full"), now: now)
        } else {
          do {
            devices[index].disk = try record.encoded()
          } catch {
            preconditionFailure("a record did not encode: \(error)")
          }
          actions += devices[index].core.persistSucceeded(record, now: now)
        }
      }
    }
  }

  private mutating func dropExchange(_ request: RequestID, on index: Int) {
    guard let position = outstanding.firstIndex(where: { $0.device == index && $0.request == request }) else { return }
    let exchange = outstanding.remove(at: position)
    if case .parked(let pollID) = exchange.progress { applyServer(server.pollCancelled(pollID, now: now)) }
  }

  private func position(of request: RequestID, on device: Int) -> Int? {
    outstanding.firstIndex { $0.device == device && $0.request == request }
  }

  /// Routes the server's poll completions back to the waiting requests.
  private mutating func applyServer(_ actions: [Server.Action]) {
    let needed = storage.collect(from: &server)
    for case .completePoll(let pollID, let outcome) in actions {
      guard
        let position = outstanding.firstIndex(where: {
          if case .parked(pollID) = $0.progress { true } else { false }
        })
      else { continue }
      switch outcome {
      case .events(let events): outstanding[position].progress = .answered(.events(events))
      case .failed(let error): outstanding[position].progress = .answered(.failed(.api(error)))
      case .cancelled: outstanding[position].progress = .answered(.failed(.connectionFailed("dropped")))
      }
      outstanding[position].needs = needed
    }
  }

  private mutating func deliverToServer(_ request: RequestID, on device: Int) {
    guard let position = position(of: request, on: device), case .toServer = outstanding[position].progress else {
      return
    }
    let exchange = outstanding[position]
    let user = devices[exchange.device].user
    trace.append("\(now) device \(exchange.device) \(request) reaches the server")
    switch exchange.exchange {
    case .register(let clientID):
      let (registration, actions) = server.register(
        user: user,
        eventTypes: configuration.eventTypes,
        lifespan: configuration.queueLifespan,
        clientID: clientID,
        now: now
      )
      outstanding[position].progress = .answered(.registered(registration))
      applyServer(actions)
    case .poll(let finger, let dontBlock, let limit):
      let pollID = PollID(nextPollID)
      nextPollID += 1
      outstanding[position].progress = .parked(pollID)
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
    case .submit(var body):
      if body.requests.count > 1, Int.random(in: 0..<100, using: &batchCuts) < faults.batchCut {
        body.requests = Array(body.requests.prefix(Int.random(in: 1..<body.requests.count, using: &batchCuts)))
        trace.append(
          "\(now) device \(exchange.device) \(request): only \(body.requests.count) of the batch reach the server"
        )
      }
      do {
        let (outcomes, actions) = try server.applyMutations(body, from: user, now: now)
        outstanding[position].progress = .answered(.outcomes(outcomes))
        applyServer(actions)
      } catch {
        outstanding[position].progress = .answered(.failed(.api(error)))
      }
    case .fetch(let body, let queueID):
      do {
        let answer = try server.fetch(body, queueID: queueID, user: user, now: now)
        outstanding[position].progress = .answered(.fetched(answer))
      } catch {
        outstanding[position].progress = .answered(.failed(.api(error)))
      }
    }
    // The answer shows this input's effects: it leaves once they are durable.
    outstanding[position].needs = storage.collect(from: &server)
  }

  private mutating func deliverToClient(_ request: RequestID, on device: Int) {
    guard let position = position(of: request, on: device), case .answered(let answer) = outstanding[position].progress
    else {
      return
    }
    let exchange = outstanding.remove(at: position)
    // Group commit: the answer waits for the records it shows.
    if exchange.needs > storage.durablePosition { storage.flush() }
    let index = exchange.device
    trace.append("\(now) device \(index) \(request) answered: \(describe(answer))")
    let actions: [Core.Action]
    switch (exchange.exchange, answer) {
    case (.register, .registered(let registration)):
      actions = devices[index].core.registerSucceeded(request, registration, now: now)
    case (.register, .failed(let error)): actions = devices[index].core.registerFailed(request, error, now: now)
    case (.poll, .events(let events)): actions = devices[index].core.pollSucceeded(request, events, now: now)
    case (.poll, .failed(let error)): actions = devices[index].core.pollFailed(request, error, now: now)
    case (.submit, .outcomes(let outcomes)): actions = devices[index].core.submitAnswered(request, outcomes, now: now)
    case (.submit, .failed(let error)): actions = devices[index].core.submitFailed(request, error, now: now)
    case (.fetch, .fetched(let answer)): actions = devices[index].core.fetchSucceeded(request, answer, now: now)
    case (.fetch, .failed(let error)): actions = devices[index].core.fetchFailed(request, error, now: now)
    default: preconditionFailure("answer \(answer) does not fit \(exchange.exchange)")
    }
    perform(actions, on: index)
  }

  /// A short description with no dictionary in it, so a trace is the same on every run.
  private func describe(_ answer: Answer) -> String {
    switch answer {
    case .registered(let registration): "registered \(registration.finger)"
    case .events(let events): "events \(events.map(\.id))"
    case .fetched(let answer): "page of \(answer.page.items.count) at event \(answer.lastEventID)"
    case .outcomes(let outcomes):
      "outcomes "
        + outcomes.map { outcome in
          switch outcome {
          case .acknowledged(let id, let receipt):
            "\(id) applied=\(receipt.applied) through \(receipt.eventsThrough.sorted { $0.key < $1.key }.map { "\($0.key)@\($0.value)" })"
          case .refused(let id, let error): "\(id) \(error.code.wireValue)"
          }
        }.joined(separator: "; ")
    case .failed(let error): "failed \(error)"
    }
  }

  /// Fails a request before the server, while parked, or by losing its answer after the server acted.
  private mutating func failRequest(_ request: RequestID, on device: Int) {
    guard let position = position(of: request, on: device) else { return }
    let exchange = outstanding.remove(at: position)
    let error: TransportError = [
      .connectionFailed(), .timedOut, .serverError(status: 503), .api(.rateLimitHit(retryAfter: .seconds(2))),
      .api(.malformedResponse("garbled")),
    ].randomElement(using: &random)!
    if case .parked(let pollID) = exchange.progress { applyServer(server.pollCancelled(pollID, now: now)) }
    trace.append("\(now) device \(exchange.device) \(request) fails with \(error)")
    let index = exchange.device
    let actions: [Core.Action]
    switch exchange.exchange {
    case .register: actions = devices[index].core.registerFailed(request, error, now: now)
    case .poll: actions = devices[index].core.pollFailed(request, error, now: now)
    case .submit: actions = devices[index].core.submitFailed(request, error, now: now)
    case .fetch: actions = devices[index].core.fetchFailed(request, error, now: now)
    }
    perform(actions, on: index)
  }
}
