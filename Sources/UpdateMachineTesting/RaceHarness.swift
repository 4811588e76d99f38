import EventProtocol
import EventServer
import UpdateMachine

/// One device's update-machine core and the server's core, moved by hand: every request the core makes
/// waits until the test answers it, so a test can put a fetch's answer, a poll or a write exactly where a
/// race puts them: the page read before an edit and delivered after its event, the edit read into the page
/// and its event polled later, the queue lost between a read and its answer.
///
/// Where ``LoopbackWorld`` explores interleavings at random, this composes one interleaving exactly once:
/// what a regression test of a reported race needs.
///
/// ```swift
/// var race = RaceHarness(application: NoteBoard(), reducer: NotesReducer(user: "alice"), user: "alice")
/// race.answerRegister()
/// let page = race.fetch(request)
/// let early = race.readPage(page)          // the server reads the page now
/// try race.serverCommand(edit, from: "bob") // an edit lands after the read
/// race.answerPoll()                         // its event reaches the device first
/// race.deliver(page, early)                 // then the page: the edit counts once
/// ```
public struct RaceHarness<Application: ServerApplication, Reducer: UpdateReducer>
where
  Reducer.State == Application.Snapshot, Reducer.Event == Application.Event,
  Reducer.Mutation == Application.Command, Application.Command: Equatable
{
  /// The device's engine core.
  public typealias Core = UpdateMachineCore<Reducer.State, Reducer.Event, Reducer.Mutation>

  /// The server's core.
  public var server: EventServerStateMachine<Application>
  /// The device's core.
  public var core: Core
  /// The user the device belongs to.
  public let user: UserID
  /// The time every step happens at (time does not pass unless the test moves it).
  public var now = Timestamp(secondsSinceEpoch: 1_700_000_000)
  /// Registrations the core asked for, oldest first, not yet answered.
  public private(set) var registers: [RequestID] = []
  /// Polls under way, with the finger each asked from.
  public private(set) var polls: [RequestID: EventFinger] = [:]
  /// Writes under way, with the batch each sent.
  public private(set) var submits: [RequestID: MutationBatch<Application.Command>] = [:]
  /// Fetches under way: the request and the queue each was asked against.
  public private(set) var fetches: [RequestID: (request: FetchRequest, queueID: QueueID)] = [:]
  /// How each fetch ended, as the core reported it to the app.
  public private(set) var outcomes: [RequestID: FetchOutcome] = [:]
  private var pollsAnswered: UInt64 = 0

  /// A server running `application` and a device of `user`'s whose core has loaded no saved state and asked
  /// to register (answer with ``answerRegister()``).
  public init(
    application: Application,
    reducer: Reducer,
    user: UserID,
    configuration: UpdateMachineConfiguration = .init(),
    seed: UInt64 = 1
  ) {
    self.user = user
    server = EventServerStateMachine(
      application: application,
      random: SeededRandomNumberGenerator(seed: seed),
      now: now
    )
    core = Core(reducer: reducer, configuration: configuration, random: SeededRandomNumberGenerator(seed: seed &+ 1))
    perform(core.loaded(nil, now: now))
  }

  /// Records what the core asked for; saving succeeds at once.
  public mutating func perform(_ actions: [Core.Action]) {
    var actions = actions
    var index = 0
    while index < actions.count {
      switch actions[index] {
      case .persist(let record, _): actions += core.persistSucceeded(record, now: now)
      case .register(let id, _, _, _): registers.append(id)
      case .poll(let id, let finger, _, _): polls[id] = finger
      case .submit(let id, let body, _): submits[id] = body
      case .fetch(let id, let request, let queueID, _): fetches[id] = (request, queueID)
      case .fetchFinished(let id, let outcome): outcomes[id] = outcome
      case .cancel(let id):
        polls[id] = nil
        fetches[id] = nil
      }
      index += 1
    }
  }

  /// The server registers a queue for the oldest registration asked, and the core gets it.
  public mutating func answerRegister() {
    let id = registers.removeFirst()
    let (registration, _) = server.register(
      user: user,
      eventTypes: nil,
      lifespan: nil,
      clientID: core.clientID,
      now: now
    )
    perform(core.registerSucceeded(id, registration, now: now))
  }

  /// Answers the poll under way with every event its queue holds after its finger.
  public mutating func answerPoll() {
    guard let (id, finger) = polls.first else { return }
    polls[id] = nil
    pollsAnswered += 1
    let actions = server.poll(
      PollID(pollsAnswered),
      queueID: finger.queueID,
      user: user,
      lastEventID: finger.lastEventID,
      dontBlock: true,
      now: now
    )
    for case .completePoll(_, .events(let events)) in actions {
      perform(core.pollSucceeded(id, events, now: now))
    }
  }

  /// The poll under way fails with `error` (a lost queue, a revoked key).
  public mutating func failPoll(_ error: TransportError) {
    guard let (id, _) = polls.first else { return }
    polls[id] = nil
    perform(core.pollFailed(id, error, now: now))
  }

  /// The app asks for a page.
  /// - Returns: The fetch's id.
  public mutating func fetch(_ request: FetchRequest) -> RequestID {
    let (id, actions) = core.fetch(request, now: now)
    perform(actions)
    return id
  }

  /// Fetch `id`'s request fails with `error` before the server read it (a lost connection, a refusal).
  public mutating func failFetch(_ id: RequestID, _ error: TransportError) {
    fetches[id] = nil
    perform(core.fetchFailed(id, error, now: now))
  }

  /// The server reads fetch `id`'s page now; the answer reaches the device when ``deliver(_:_:)`` is called.
  /// - Throws: The server's refusal of the request.
  public mutating func readPage(_ id: RequestID) throws(EventAPIError) -> FetchAnswer<Application.FetchedItem> {
    let (request, queueID) = fetches.removeValue(forKey: id)!
    return try server.fetch(request, queueID: queueID, user: user, now: now)
  }

  /// The answer the server read for fetch `id` reaches the device.
  public mutating func deliver(_ id: RequestID, _ answer: FetchAnswer<Application.FetchedItem>) {
    perform(core.fetchSucceeded(id, answer, now: now))
  }

  /// The server reads fetch `id`'s page and the device gets it at once.
  /// - Throws: The server's refusal of the request.
  public mutating func answerFetch(_ id: RequestID) throws(EventAPIError) {
    deliver(id, try readPage(id))
  }

  /// Answers every fetch under way, including those asked again meanwhile.
  /// - Throws: The server's refusal of a request.
  public mutating func answerFetches() throws(EventAPIError) {
    while let id = fetches.keys.min() { try answerFetch(id) }
  }

  /// The server runs a command from `author`, not through any outbox (another user's write).
  /// - Throws: The application's refusal.
  public mutating func serverCommand(_ command: Application.Command, from author: UserID) throws(EventAPIError) {
    _ = try server.handle(command, from: author, now: now)
  }

  /// The app submits a write to its outbox.
  public mutating func submit(_ command: Application.Command) {
    perform(core.submit(command, now: now).1)
  }

  /// The oldest write under way reaches the server and is applied; its answer is lost (the events will
  /// tell the device).
  public mutating func deliverSubmitLosingAnswer() {
    guard let id = submits.keys.min(), let body = submits.removeValue(forKey: id) else { return }
    _ = try? server.applyMutations(body, from: user, now: now)
  }

  /// The oldest write under way reaches the server, and its answer the device.
  public mutating func answerSubmit() {
    guard let id = submits.keys.min(), let body = submits.removeValue(forKey: id) else { return }
    do throws(EventAPIError) {
      let (outcomes, _) = try server.applyMutations(body, from: user, now: now)
      perform(core.submitAnswered(id, outcomes, now: now))
    } catch {
      perform(core.submitFailed(id, .api(error), now: now))
    }
  }
}
