import EventProtocol
import JSONCoding

/// The pure, synchronous core of ``EventServer``: queues, ids, pruning, parked polls with deadlines and
/// expiry, with Zulip's event-queue contract.
///
/// Every input is a `mutating func` named for what happened; it takes `now` and returns the ``Action``s the
/// shell must perform (complete a waiting poll). The machine never reads a clock, sleeps or does I/O, so
/// tests and the simulation drive it directly, and a seed replays byte for byte. Randomness (queue ids,
/// heartbeat jitter) comes from the generator it was created with.
///
/// ```swift
/// var server = EventServerStateMachine(application: app, random: SeededRandomNumberGenerator(seed: 1), now: t0)
/// let (registration, _) = server.register(user: "alice", eventTypes: nil, lifespan: nil, now: t0)
/// let actions = server.poll(PollID(1), queueID: registration.queueID, user: "alice",
///                           lastEventID: -1, dontBlock: false, now: t0)   // [] : parked
/// ```
public struct EventServerStateMachine<Application: ServerApplication>: Sendable {
  /// The application's event type.
  public typealias Event = Application.Event

  /// What a poll is answered with.
  public enum PollOutcome: Sendable, Equatable {
    /// Every event the queue holds after the poll's acknowledgement (possibly none).
    case events([EventEnvelope<Event>])
    /// The poll was refused; nothing was changed.
    case failed(EventAPIError)
    /// The poll ended without an answer (its caller cancelled, or the connection dropped); every event
    /// stays queued.
    case cancelled
  }

  /// What the shell must do.
  public enum Action: Sendable, Equatable {
    /// Answer the poll `PollID` with the outcome.
    case completePoll(PollID, PollOutcome)
    /// Send a push notification through the push gateway.
    case sendPush(PushNotification)
  }

  /// The application whose state the queues follow.
  public internal(set) var application: Application
  /// Limits and timings.
  public let configuration: EventServerConfiguration
  /// The queues: by slot, by id and by user (oldest first: the order in which events are delivered and
  /// queues evicted), with their expiry index.
  var table = QueueTable<Event>()
  /// The slot of the queue each parked poll waits on.
  var parkedPolls: [PollID: Int] = [:]
  /// The heartbeat deadline of each parked poll; entries of polls that ended earlier are skipped.
  private var heartbeats = DeadlineHeap<PollID>()
  /// The recent mutation decisions of each (user, client), so a retried mutation is applied at most once.
  public internal(set) var mutationMemory = MutationMemory()
  /// Which installations get push notifications, and when.
  public internal(set) var pushRegistry = PushRegistry()
  /// When expired queues are next swept away.
  public internal(set) var nextSweepAt: Timestamp
  var random: any RandomNumberGenerator & Sendable
  /// How many pending events `user`'s commands have put in other users' queues (each queue holding one
  /// counts). For operators: it refuses nothing, since what readers leave unread is not the writer's doing.
  public func pendingEvents(authoredBy user: UserID) -> Int { table.store.pendingByAuthor[user] ?? 0 }

  /// How many events were over ``EventServerConfiguration/maximumEventBytes`` and queued all the same (an
  /// application whose events outgrow its commands); for metrics and logs.
  public internal(set) var oversizeEvents = 0
  /// The inputs recorded for the input log since the shell last took them; `nil` when not recording.
  var recorded: [ServerLogEntry<Application.Command>]?
  /// Polls' acknowledgements the log does not hold yet (recorded lazily: a poll writes nothing).
  var unrecordedAcknowledgements = UnrecordedAcknowledgements()

  /// Creates a server with no queues.
  /// - Parameters:
  ///   - application: The application served.
  ///   - configuration: Limits and timings.
  ///   - random: The source of queue ids and heartbeat jitter.
  ///   - now: The current time; the first sweep is one ``EventServerConfiguration/sweepInterval`` later.
  public init(
    application: Application,
    configuration: EventServerConfiguration = .init(),
    random: some RandomNumberGenerator & Sendable,
    now: Timestamp
  ) {
    self.application = application
    self.configuration = configuration
    self.random = random
    self.nextSweepAt = now.advanced(by: configuration.sweepInterval)
  }

  /// The earliest time at which ``timerFired(now:)`` has work: a heartbeat, a sweep, a coalesced push or
  /// the application's own deadline (``ServerApplication/nextDeadline``).
  /// - Complexity: O(1).
  public var nextDeadline: Timestamp {
    min(
      nextSweepAt,
      heartbeats.nextTime ?? nextSweepAt,
      acknowledgementsDueAt ?? nextSweepAt,
      pushRegistry.nextDueAt ?? nextSweepAt,
      application.nextDeadline ?? nextSweepAt
    )
  }

  /// Every queue, by id, for inspection.
  /// - Complexity: O(*n*) in the queues: use ``queue(_:)`` to look one up.
  public var queues: [QueueID: EventQueue<Event>] { table.byID }

  /// The queue `queueID` as it stands, if it exists (expired or not).
  /// - Complexity: O(1).
  public func queue(_ queueID: QueueID) -> EventQueue<Event>? { table[queueID] }

  /// How many queues exist (some may have expired and not been swept yet).
  /// - Complexity: O(1).
  public var queueCount: Int { table.store.count }

  /// How many polls are parked.
  /// - Complexity: O(1).
  public var parkedPollCount: Int { parkedPolls.count }

  /// The queues of `user`, oldest first.
  public func queueIDs(of user: UserID) -> [QueueID] {
    table.store.slots(of: user).map { table.store[slot: $0].id }
  }

  // MARK: - Inputs

  /// A user registers: creates a queue and takes the snapshot in one atomic step.
  ///
  /// When the user already holds ``EventServerConfiguration/maximumQueuesPerUser`` queues, the least
  /// recently used one is evicted first (its parked poll, if any, fails with `BAD_EVENT_QUEUE_ID`).
  /// - Parameters:
  ///   - user: The registering user, who alone may poll the queue.
  ///   - eventTypes: The event types to queue; `nil` for all. Heartbeats are always queued.
  ///   - lifespan: The idle timeout asked for; `nil` or zero for the default, capped at the maximum.
  ///   - clientID: The installation the queue serves, when the client said (for push notifications).
  ///   - now: The current time.
  /// - Returns: The registration (queue id, `lastEventID` -1, snapshot) and the actions to perform.
  public mutating func register(
    user: UserID,
    eventTypes: Set<String>?,
    lifespan: Duration?,
    clientID: ClientID? = nil,
    now: Timestamp
  ) -> (Registration<Application.Snapshot>, [Action]) {
    var actions: [Action] = []
    // Decided here, from what is not durable (parked polls), and recorded as decisions.
    var remaining = Array(table.store.slots(of: user))
    var evicted = remaining.filter { table.store[slot: $0].isExpired(at: now) }
    remaining.removeAll { evicted.contains($0) }
    while remaining.count >= max(configuration.maximumQueuesPerUser, 1) {
      let leastRecentlyUsed = remaining.min { lhs, rhs in
        effectiveContact(lhs, now: now) < effectiveContact(rhs, now: now)
      }!
      evicted.append(leastRecentlyUsed)
      remaining.removeAll { $0 == leastRecentlyUsed }
    }
    var queueID = QueueID.random(using: &random)
    while table.store.slot(of: queueID) != nil { queueID = QueueID.random(using: &random) }
    let idleTimeout = configuration.idleTimeout(forLifespan: lifespan)
    let evictedIDs = evicted.map { table.store[slot: $0].id }
    record(
      .registered(
        user: user,
        queueID: queueID,
        eventTypes: eventTypes,
        idleTimeout: idleTimeout,
        clientID: clientID,
        evicted: evictedIDs
      ),
      now: now
    )
    let queue = applyRegistered(
      user: user,
      queueID: queueID,
      eventTypes: eventTypes,
      idleTimeout: idleTimeout,
      clientID: clientID,
      evicted: evictedIDs,
      now: now,
      actions: &actions
    )
    let registration = Registration(
      queueID: queueID,
      lastEventID: queue.lastEventID,
      longPollTimeout: configuration.recommendedLongPollTimeout,
      snapshot: application.snapshot(for: user)
    )
    return (registration, actions)
  }

  /// A poll arrives: validate, prune through `lastEventID`, then answer with every remaining event, or park.
  ///
  /// Validation comes first, and a refused poll changes nothing: an unknown, expired or other user's queue
  /// is `BAD_EVENT_QUEUE_ID` (the same answer for all three); a `lastEventID` below the pruned mark is
  /// "already pruned"; one the queue never reached is "not in this queue". A poll on a queue that already has
  /// a parked poll completes that one with the queue's contents. With nothing to deliver and `dontBlock`
  /// false, the poll parks until an event arrives or a heartbeat deadline 45–55 s away.
  /// - Parameters:
  ///   - pollID: The shell's id for this request.
  ///   - queueID: The queue to poll.
  ///   - user: The authenticated caller.
  ///   - lastEventID: The last event the caller has applied; everything up to it is acknowledged.
  ///   - dontBlock: Answer at once even when there is nothing to deliver.
  ///   - limit: The most events the answer may carry (the oldest first); `nil` for all. A client catching up
  ///     on a long backlog polls again with the last id it got.
  ///   - now: The current time.
  /// - Returns: The actions: this poll's completion unless it parked, and a displaced poll's completion.
  public mutating func poll(
    _ pollID: PollID,
    queueID: QueueID,
    user: UserID,
    lastEventID: Int,
    dontBlock: Bool,
    limit: Int? = nil,
    now: Timestamp
  ) -> [Action] {
    precondition(parkedPolls[pollID] == nil, "\(pollID) is already parked; the shell reused a poll id")
    var actions: [Action] = []
    let slot: Int
    do throws(EventAPIError) {
      slot = try liveQueue(queueID, of: user, now: now, actions: &actions)
      guard table.store[slot: slot].isIntact(acknowledging: lastEventID) else {
        // The client saw events of a lost incarnation under ids this queue skipped: it must re-register.
        record(.queuesRemoved(queueIDs: [queueID]), now: now)
        removeQueue(slot, actions: &actions)
        throw EventAPIError.badEventQueueID(queueID)
      }
      try table.store[slot: slot].validateAcknowledgement(lastEventID)
    } catch {
      actions.append(.completePoll(pollID, .failed(error)))
      return actions
    }
    noteAcknowledgement(queueID, lastEventID: lastEventID, now: now)
    applyAcknowledged(slot: slot, lastEventID: lastEventID, now: now)
    if let displaced = table.store[parkedPollOf: slot] {
      completeParkedPoll(displaced.pollID, on: slot, now: now, actions: &actions)
    }
    if table.store.eventCount(slot) > 0 || dontBlock {
      actions.append(.completePoll(pollID, .events(table.events(slot, limit: limit))))
    } else {
      let heartbeatAt = heartbeatDeadline(after: now)
      table.store[parkedPollOf: slot] = .init(pollID: pollID, heartbeatAt: heartbeatAt, limit: limit)
      parkedPolls[pollID] = slot
      heartbeats.push(pollID, at: heartbeatAt)
    }
    return actions
  }

  /// Reads a page of partial state for `user`, atomic with queue `queueID`: the application's page and the
  /// queue's last event id come from the same state. A read: nothing changes, nothing is logged.
  /// - Throws: `BAD_EVENT_QUEUE_ID` for an unknown, expired or other user's queue; `BAD_REQUEST` for a bad
  ///   request or a narrow the application refuses.
  public func fetch(
    _ request: FetchRequest,
    queueID: QueueID,
    user: UserID,
    now: Timestamp
  ) throws(EventAPIError) -> FetchAnswer<Application.FetchedItem> {
    let slot = try fetchableQueue(queueID, user: user, request: request, now: now)
    let page: FetchPage<Application.FetchedItem>
    do {
      page = try application.fetch(request, for: user)
    } catch {
      throw .badRequest(error.reason)
    }
    return FetchAnswer(queueID: queueID, lastEventID: table.store[slot: slot].lastEventID, request: request, page: page)
  }

  /// The slot of the queue a fetch reads with, after checking the queue and the request.
  /// - Throws: As ``fetch(_:queueID:user:now:)``, before the application is asked.
  func fetchableQueue(
    _ queueID: QueueID,
    user: UserID,
    request: FetchRequest,
    now: Timestamp
  ) throws(EventAPIError)
    -> Int
  {
    guard let slot = table.store.slot(of: queueID), table.store[slot: slot].user == user,
      !table.store[slot: slot].isExpired(at: now)
    else { throw .badEventQueueID(queueID) }
    if let problem = request.problem { throw .badRequest(problem) }
    return slot
  }

  /// The caller of a parked poll went away. The poll completes as cancelled; every event stays queued.
  /// A poll that is no longer parked (already completed) is ignored.
  public mutating func pollCancelled(_ pollID: PollID, now: Timestamp) -> [Action] {
    guard let slot = parkedPolls.removeValue(forKey: pollID) else { return [] }
    table.store[parkedPollOf: slot] = nil
    let queueID = table.store[slot: slot].id
    noteAcknowledgement(queueID, lastEventID: nil, now: now)
    applyAcknowledged(slot: slot, lastEventID: nil, now: now)
    discardEndedHeartbeats()
    return [.completePoll(pollID, .cancelled)]
  }

  /// Changes the application's own bookkeeping outside any command (such as taking the list of files to
  /// delete). The change must not alter any user's snapshot: no event announces it.
  public mutating func updateBookkeeping<Result>(_ body: (inout Application) -> Result) -> Result {
    body(&application)
  }

  /// A user deletes one of their queues. Its parked poll, if any, fails with `BAD_EVENT_QUEUE_ID`.
  /// - Throws: `BAD_EVENT_QUEUE_ID` for an unknown, expired or other user's queue; nothing changes.
  public mutating func deleteQueue(_ queueID: QueueID, user: UserID, now: Timestamp) throws(EventAPIError) -> [Action] {
    var actions: [Action] = []
    let slot: Int
    do {
      slot = try liveQueue(queueID, of: user, now: now, actions: &actions)
    } catch {
      if actions.isEmpty { throw error }
      return actions
    }
    record(.queuesRemoved(queueIDs: [queueID]), now: now)
    removeQueue(slot, actions: &actions)
    return actions
  }

  /// A user sends a command. The application's change and the delivery of its events to every accepting
  /// queue happen in this one step.
  /// - Throws: `BAD_REQUEST` when the application rejects the command; nothing changes.
  public mutating func handle(
    _ command: Application.Command,
    from user: UserID,
    now: Timestamp
  ) throws(EventAPIError) -> [Action] {
    let actions = try handle(command, from: user, origin: nil, now: now)
    record(.commandHandled(user: user, command: command), now: now)
    return actions
  }

  /// The application's deadline work was decided outside the machine (a stored application's, in its
  /// database transaction): `command` carries what it delivered, and the application hands the deliveries
  /// back (``StoredRelay``). Nobody authored them: they count toward no user's budget.
  /// - Returns: The actions: parked polls the events wake, pushes.
  public mutating func deadlineDecided(_ command: Application.Command, now: Timestamp) -> [Action] {
    record(.deadlineDecided(command: command), now: now)
    var actions: [Action] = []
    applyDeadlineDecided(command, now: now, actions: &actions)
    return actions
  }

  mutating func applyDeadlineDecided(_ command: Application.Command, now: Timestamp, actions: inout [Action]) {
    // The relay hands back what was decided, whoever it names as the sender; a refusal delivers nothing.
    guard let deliveries = try? application.handle(command, from: UserID(""), at: now) else { return }
    deliver(deliveries, from: nil, origin: nil, now: now, actions: &actions)
  }

  /// Applies a command; events in `user`'s own queues carry `origin` when the command is a mutation.
  mutating func handle(
    _ command: Application.Command,
    from user: UserID,
    origin: MutationOrigin?,
    now: Timestamp
  ) throws(EventAPIError) -> [Action] {
    let deliveries: [Delivery<Event>]
    do {
      deliveries = try application.handle(command, from: user, at: now)
    } catch {
      throw .badRequest(error.reason)
    }
    var actions: [Action] = []
    deliver(deliveries, from: user, origin: origin, now: now, actions: &actions)
    return actions
  }

  /// Queues the application's events in every accepting queue of their recipients, answers the parked
  /// polls they wake once all are queued, and schedules pushes. `author` is the user whose command caused
  /// them (`nil` for the application's own deadlines): their events in other users' queues count toward
  /// the per-author budget, and those in the author's own queues carry `origin`.
  mutating func deliver(
    _ deliveries: [Delivery<Event>],
    from user: UserID?,
    origin: MutationOrigin?,
    now: Timestamp,
    actions: inout [Action]
  ) {
    // Push bookkeeping only when some installation has a token: the common server path skips it.
    let tracksPushes = !pushRegistry.isEmpty
    var notified: [UserID] = []
    var notifiedSet: Set<UserID> = []
    var servedByPoll: Set<MutationSource> = []
    var toWake: [Int] = []
    var toWakeSet: Set<Int> = []
    for delivery in deliveries {
      let eventType = delivery.event.eventType
      // The event is stored once, when the first queue takes it, and measured then.
      var entry: Int?
      var joinsPrevious = false
      var holders = 0
      if tracksPushes {
        for recipient in delivery.recipients where notifiedSet.insert(recipient).inserted {
          notified.append(recipient)
        }
      }
      // Every queue of every distinct recipient, found without hashing again when the application sends to
      // a list it keeps (``AudienceCache``).
      for slot in table.store.slots(reaching: delivery.recipients) {
        guard table.store[slot: slot].accepts(eventType) else { continue }
        if entry == nil {
          // Another user's command must not cost a queue: the event is queued all the same, and counted.
          let (fits, encoded) = measure(delivery.event)
          if !fits { oversizeEvents += 1 }
          entry = table.add(.payload(delivery.event), author: user, origin: origin, encodedPayload: encoded)
          joinsPrevious = table.store.joinsPrevious(entry!)
        }
        let isParked = table.store[slot: slot].hasParkedPoll
        if tracksPushes, isParked, let clientID = table.store[slot: slot].clientID {
          servedByPoll.insert(MutationSource(user: table.store[slot: slot].user, clientID: clientID))
        }
        if isParked, toWakeSet.insert(slot).inserted { toWake.append(slot) }
        if give(entry!, to: slot, joinsPrevious: joinsPrevious, actions: &actions) { holders += 1 }
      }
      if let entry {
        // Counted once for every queue that took it: no compare of the author per queue.
        table.store.settle(entry, heldBy: holders, author: user)
        table.dropIfUnheld(entry)
      }
    }
    // Parked polls are answered once every event of the command is queued: a client never receives half
    // of a command's events in one batch (and the rest in the next).
    for slot in toWake where table.store.isOccupied(slot) {
      if let parked = table.store[parkedPollOf: slot] {
        completeParkedPoll(parked.pollID, on: slot, now: now, actions: &actions)
      }
    }
    for recipient in notified {
      for installation in pushRegistry.installations(of: recipient) {
        if servedByPoll.contains(installation) {
          pushRegistry.servedByPoll(installation)
          continue
        }
        if pushRegistry.eventsQueued(for: installation, now: now, interval: configuration.pushInterval) == .sendNow {
          actions.append(.sendPush(composePush(for: installation, now: now)))
        }
      }
    }
  }

  /// The longest push token accepted, in bytes (platform tokens are far shorter).
  public static var maximumPushTokenBytes: Int { 4096 }

  /// A device registers its push token for one of `user`'s installations (replacing the installation's
  /// earlier token). `platform` says which sender delivers to it (`nil`: the server's default).
  /// - Throws: `BAD_REQUEST`, changing nothing, when the token is empty or over ``maximumPushTokenBytes``,
  ///   the client id is not 1 to `ClientID/maximumLength` bytes, or the user already has
  ///   ``EventServerConfiguration/maximumClientsPerUser`` installations registered (a token the platform
  ///   reports invalid frees its place).
  public mutating func registerPushToken(
    _ token: PushToken,
    platform: PushPlatform? = nil,
    user: UserID,
    clientID: ClientID,
    now: Timestamp
  ) throws(EventAPIError) {
    guard (1...Self.maximumPushTokenBytes).contains(token.rawValue.utf8.count),
      (1...ClientID.maximumLength).contains(clientID.rawValue.utf8.count)
    else {
      throw .badRequest(
        "a push token is 1 to \(Self.maximumPushTokenBytes) bytes, a client id 1 to \(ClientID.maximumLength)"
      )
    }
    let installation = MutationSource(user: user, clientID: clientID)
    if pushRegistry.entries[installation] == nil,
      pushRegistry.installations(of: user).count >= configuration.maximumClientsPerUser
    {
      throw .badRequest("at most \(configuration.maximumClientsPerUser) installations per user may register for pushes")
    }
    record(.pushTokenRegistered(token: token, user: user, clientID: clientID, platform: platform), now: now)
    pushRegistry.register(token: token, platform: platform, for: MutationSource(user: user, clientID: clientID))
  }

  /// The platform reported `token` invalid: the installations using it get no more pushes.
  public mutating func pushTokenInvalid(_ token: PushToken, now: Timestamp) {
    record(.pushTokenInvalidated(token: token), now: now)
    pushRegistry.tokenInvalid(token)
  }

  /// The push for `installation`, composed now: its live queue's latest id and pending events when they fit
  /// the payload limit, the bare hint when they do not, and an empty hint when its queue has expired.
  private func composePush(for installation: MutationSource, now: Timestamp) -> PushNotification {
    let entry = pushRegistry.entries[installation]!
    let liveSlot = Array(table.store.slots(of: installation.user)).reversed().first {
      table.store[slot: $0].clientID == installation.clientID && !table.store[slot: $0].isExpired(at: now)
    }
    var payload = PushPayload<Event>(queueID: nil, lastEventID: nil, events: nil)
    if let liveSlot {
      let queue = table.store[slot: liveSlot]
      payload = PushPayload(
        queueID: queue.id,
        lastEventID: queue.lastEventID,
        events: table.events(liveSlot, limit: nil)
      )
    }
    var bytes = (try? WireFormat.encode(payload)).map { [UInt8]($0) } ?? []
    if bytes.count > configuration.maximumPushPayloadBytes {
      payload.events = nil
      bytes = (try? WireFormat.encode(payload)).map { [UInt8]($0) } ?? []
    }
    return PushNotification(token: entry.token, platform: entry.platform, installation: installation, payload: bytes)
  }

  /// Whether `event`, inside the envelope a poll answers it in, is within the size limit, and its payload's
  /// members as JSON, which answers carrying it then copy instead of encoding it again. Measured as its
  /// envelope would be (a payload may encode only there: a top-level empty keyed container does not); an
  /// event that cannot be encoded at all is not a size, and counts as fitting (the application's defect,
  /// found by its tests, not a reason to drop anyone's queue). Without a size limit nothing is encoded.
  private func measure(_ event: Event) -> (fits: Bool, encoded: EncodedMembers?) {
    guard let limit = configuration.maximumEventBytes else { return (true, nil) }
    guard let encoded = try? EncodedMembers.encoding(event) else {
      // Not an object (or not encodable alone): measured in its envelope, the old way.
      guard
        let bytes = try? WireJSON.encode(EventEnvelope(id: Int.max, body: .payload(event)), sortedKeys: false)
      else { return (true, nil) }
      return (bytes.count <= limit, nil)
    }
    return (encoded.envelopeSize(eventType: event.eventType) <= limit, encoded)
  }

  /// A client's outbox sends a mutation. It is applied at most once per (user, client, mutation id): a
  /// repeat of a decided one (same id, same digest) gets the same answer again (its receipt or its
  /// rejection) without applying it. An id already decided for a different write, or older than the
  /// remembered window, is refused with `MUTATION_ID_REUSED`, so the client can take a new client id and
  /// send the write again: nothing is acknowledged that was not applied.
  /// - Parameters:
  ///   - command: The write, as the application's command.
  ///   - user: The user the request authenticated as.
  ///   - clientID: The installation whose outbox sent it.
  ///   - mutationID: The write's id in that outbox.
  ///   - digest: The write's `MutationDigest`; the shell computes it from the command.
  ///   - commandBytes: The command's size in bytes of JSON, when the shell measured it (as it digested it):
  ///     over ``EventServerConfiguration/maximumCommandBytes`` the mutation is refused before it is applied.
  ///   - now: The server's time.
  /// - Returns: The receipt, with each of the user's queues' last event id after the mutation, and the actions.
  /// - Throws: `BAD_REQUEST` when the application rejects the mutation (and again for every repeat of it),
  ///   when the client id is longer than `ClientID/maximumLength`, the mutation id outside
  ///   `MutationID/valid`, or the command too large; `MUTATION_ID_REUSED` as above.
  public mutating func applyMutation(
    _ command: Application.Command,
    from user: UserID,
    clientID: ClientID,
    mutationID: MutationID,
    digest: MutationDigest,
    commandBytes: Int? = nil,
    now: Timestamp
  ) throws(EventAPIError) -> (MutationReceipt, [Action]) {
    if let problem = mutationProblem(clientID: clientID, mutationID: mutationID, commandBytes: commandBytes) {
      throw problem
    }
    // No budget on what the user's earlier writes left unread in others' queues: that is the readers' doing, and
    // a reader must not be able to stop a writer (a queue its owner leaves unread overflows and is dropped at
    // `maximumEventsPerQueue`, as in Zulip, and its client registers again).
    let source = MutationSource(user: user, clientID: clientID)
    if case .reused = mutationMemory.verdict(for: source, mutationID: mutationID, digest: digest) {
      throw .mutationIDReused(mutationID)
    }
    record(
      .mutationReceived(user: user, clientID: clientID, mutationID: mutationID, digest: digest, command: command),
      now: now
    )
    return try decideMutation(command, from: source, mutationID: mutationID, digest: digest, now: now)
  }

  /// Why a mutation is refused before anything is decided (client id or mutation id out of bounds, command
  /// too large), or `nil`.
  func mutationProblem(clientID: ClientID, mutationID: MutationID, commandBytes: Int?) -> EventAPIError? {
    guard clientID.rawValue.utf8.count <= ClientID.maximumLength, !clientID.rawValue.isEmpty else {
      return .badRequest("client id must be 1 to \(ClientID.maximumLength) bytes")
    }
    guard MutationID.valid.contains(mutationID) else {
      return .badRequest("mutation_id must be 1 to \(MutationID.valid.upperBound.rawValue)")
    }
    if let limit = configuration.maximumCommandBytes, let commandBytes, commandBytes > limit {
      return .badRequest("the mutation's command is \(commandBytes) bytes; at most \(limit) are accepted")
    }
    return nil
  }

  /// Decides a mutation that is not a reuse of an id: every step from here follows from durable state, so
  /// replay reaches the same verdict.
  mutating func decideMutation(
    _ command: Application.Command,
    from source: MutationSource,
    mutationID: MutationID,
    digest: MutationDigest,
    now: Timestamp
  ) throws(EventAPIError) -> (MutationReceipt, [Action]) {
    let user = source.user
    let clientID = source.clientID
    switch mutationMemory.verdict(for: source, mutationID: mutationID, digest: digest) {
    case .repeatOfApplied:
      mutationMemory.touch(source, now: now)
      return (receipt(for: user, applied: false), [])
    case .repeatOfRejected(let reason):
      mutationMemory.touch(source, now: now)
      throw .badRequest(reason)
    case .reused:
      throw .mutationIDReused(mutationID)
    case .new:
      break
    }
    let origin = MutationOrigin(clientID: clientID, mutationID: mutationID)
    do {
      let actions = try handle(command, from: user, origin: origin, now: now)
      remember(MutationDecision(mutationID: mutationID, digest: digest, rejection: nil), for: source, now: now)
      return (receipt(for: user, applied: true), actions)
    } catch {
      remember(
        MutationDecision(mutationID: mutationID, digest: digest, rejection: error.message),
        for: source,
        now: now
      )
      throw error
    }
  }

  /// Applies a mutation request as it came over the wire, digesting its write.
  /// - Throws: As `applyMutation(_:from:clientID:mutationID:digest:now:)`.
  public mutating func applyMutation(
    _ request: MutationRequest<Application.Command>,
    from user: UserID,
    now: Timestamp
  ) throws(EventAPIError) -> (MutationReceipt, [Action]) where Application.Command: Equatable {
    let (digest, bytes) = MutationDigest.measuring(request.mutation)
    return try applyMutation(
      request.mutation,
      from: user,
      clientID: request.clientID,
      mutationID: request.mutationID,
      digest: digest,
      commandBytes: bytes,
      now: now
    )
  }

  /// Applies a batch of one client's mutations in order, each exactly as
  /// ``applyMutation(_:from:clientID:mutationID:digest:commandBytes:now:)`` does, and stops after a
  /// `MUTATION_ID_REUSED` (the client renumbers what follows under a new client id, so nothing after it
  /// may be applied under the old one). It decides at most ``EventServerConfiguration/mutationWindow``
  /// of them (the client sends the rest next), so a repeat of the whole batch is always recognised.
  /// - Parameters:
  ///   - batch: The client's mutations, in its outbox's order.
  ///   - measured: Each request's digest and command size, in the batch's order (the shell measures them
  ///     outside the decision).
  ///   - user: The user the request authenticated as.
  ///   - now: The server's time.
  /// - Returns: One outcome per mutation decided, and the actions of them all.
  /// - Throws: `BAD_REQUEST` for a batch that cannot be decided (`MutationBatch/malformation`), before
  ///   anything is decided.
  public mutating func applyMutations(
    _ batch: MutationBatch<Application.Command>,
    measured: [(digest: MutationDigest, commandBytes: Int?)],
    from user: UserID,
    now: Timestamp
  ) throws(EventAPIError) -> ([MutationOutcome], [Action]) where Application.Command: Equatable {
    if let malformation = batch.malformation { throw .badRequest(malformation) }
    precondition(measured.count == batch.requests.count, "one measure per request")
    var outcomes: [MutationOutcome] = []
    var actions: [Action] = []
    // No more than the client's remembered decisions: a repeat of any of them must be recognised.
    for (request, measure) in zip(batch.requests, measured).prefix(max(configuration.mutationWindow, 1)) {
      do throws(EventAPIError) {
        let (receipt, applied) = try applyMutation(
          request.mutation,
          from: user,
          clientID: request.clientID,
          mutationID: request.mutationID,
          digest: measure.digest,
          commandBytes: measure.commandBytes,
          now: now
        )
        outcomes.append(.acknowledged(request.mutationID, receipt))
        actions += applied
      } catch {
        outcomes.append(.refused(request.mutationID, error))
        if error.code == .mutationIDReused { break }
      }
    }
    return (outcomes, actions)
  }

  /// Applies a batch as it came over the wire, digesting each write.
  /// - Throws: As ``applyMutations(_:measured:from:now:)``.
  public mutating func applyMutations(
    _ batch: MutationBatch<Application.Command>,
    from user: UserID,
    now: Timestamp
  ) throws(EventAPIError) -> ([MutationOutcome], [Action]) where Application.Command: Equatable {
    let measured = batch.requests.map { MutationDigest.measuring($0.mutation) }
    return try applyMutations(batch, measured: measured.map { ($0.0, $0.1) }, from: user, now: now)
  }

  private mutating func remember(_ decision: MutationDecision, for source: MutationSource, now: Timestamp) {
    mutationMemory.record(
      decision,
      for: source,
      now: now,
      window: configuration.mutationWindow,
      maximumClients: configuration.maximumClientsPerUser
    )
  }

  private func receipt(for user: UserID, applied: Bool) -> MutationReceipt {
    var through: [QueueID: Int] = [:]
    for slot in table.store.slots(of: user) {
      through[table.store[slot: slot].id] = table.store[slot: slot].lastEventID
    }
    return MutationReceipt(applied: applied, eventsThrough: through)
  }

  /// Time passed: end parked polls whose heartbeat is due with a real heartbeat event, sweep expired
  /// queues when the sweep is due, and run the application's deadline when it came.
  public mutating func timerFired(now: Timestamp) -> [Action] {
    var actions: [Action] = []
    var heartbeatQueues: [QueueID] = []
    while let (_, pollID) = heartbeats.pop(dueAt: now) {
      // Entries of polls that already ended are skipped.
      guard let slot = parkedPolls[pollID] else { continue }
      heartbeatQueues.append(table.store[slot: slot].id)
    }
    if !heartbeatQueues.isEmpty {
      record(.heartbeatsSent(queueIDs: heartbeatQueues), now: now)
      applyHeartbeats(heartbeatQueues, now: now, actions: &actions)
    }
    if let due = acknowledgementsDueAt, due <= now { recordAcknowledgements(now: now) }
    if now >= nextSweepAt {
      // The expiry index yields only what came due, so a sweep that finds nothing costs next to nothing; the
      // expired are removed in id order, so the application hears of them in a deterministic order.
      let expired = table.store.expired(at: now).map { table.store[slot: $0].id }.sorted()
      record(.swept(expired: expired), now: now)
      applySwept(expired: expired, now: now, actions: &actions)
    }
    if let due = application.nextDeadline, due <= now {
      record(.applicationDeadlineReached, now: now)
      deliver(application.deadlineReached(at: now), from: nil, origin: nil, now: now, actions: &actions)
    }
    for installation in pushRegistry.duePushes(now: now) {
      actions.append(.sendPush(composePush(for: installation, now: now)))
    }
    return actions
  }

  /// Every connection dropped (the server is shutting down): each parked poll completes as cancelled, and
  /// its events stay queued for the client's next poll. Every acknowledgement not yet recorded is recorded.
  public mutating func connectionsDropped(now: Timestamp) -> [Action] {
    let actions = parkedPolls.keys.sorted().flatMap { pollCancelled($0, now: now) }
    recordAcknowledgements(now: now)
    return actions
  }

  // MARK: - Restart

  /// The queues as they stand, for a restart: ids, next ids, pruned marks and pending events, in id order.
  /// Parked polls are not included; their connections do not survive the restart.
  public func dump() -> QueueDump<Event> {
    QueueDump(
      queues: table.store.sortedIDs.map { id in
        var queue = table[id]!
        queue.parkedPoll = nil
        return queue
      },
      mutations: mutationMemory.records,
      pushes: pushRegistry.records
    )
  }

  /// Loads queues (and the mutation memory) from a dump after a restart, replacing any present (whose parked polls fail with
  /// `BAD_EVENT_QUEUE_ID`). Each loaded queue's idle time restarts at `now`, and each queue that accepts
  /// `restart` events gets one.
  /// - Throws: ``QueueDumpError`` when the dump is inconsistent; nothing changes then.
  public mutating func restore(_ dump: QueueDump<Event>, now: Timestamp) throws(QueueDumpError) -> [Action] {
    try dump.validate()
    var actions: [Action] = []
    for queueID in table.store.sortedIDs {
      removeQueue(table.store.slot(of: queueID)!, notifyApplication: false, actions: &actions)
    }
    mutationMemory = MutationMemory(records: dump.mutations)
    pushRegistry = PushRegistry(records: dump.pushes)
    for var queue in dump.queues {
      queue.lastContact = now
      queue.parkedPoll = nil
      _ = table.insert(queue)
    }
    // Only once every queue is back: a full queue dropped here must not look like its user's last.
    for queue in dump.queues where queue.accepts(EventBody<Event>.restartType) {
      push(.restart, to: table.store.slot(of: queue.id)!, now: now, actions: &actions)
    }
    return actions
  }

  // MARK: - Helpers

  /// The slot of queue `queueID` when it exists, is `user`'s and has not expired; an expired queue is removed.
  private mutating func liveQueue(
    _ queueID: QueueID,
    of user: UserID,
    now: Timestamp,
    actions: inout [Action]
  ) throws(EventAPIError) -> Int {
    guard let slot = table.store.slot(of: queueID), table.store[slot: slot].user == user else {
      throw .badEventQueueID(queueID)
    }
    if table.store[slot: slot].isExpired(at: now) {
      record(.queuesRemoved(queueIDs: [queueID]), now: now)
      removeQueue(slot, actions: &actions)
      throw .badEventQueueID(queueID)
    }
    return slot
  }

  /// A heartbeat deadline drawn uniformly, to the millisecond, from the configured window after `now`.
  private mutating func heartbeatDeadline(after now: Timestamp) -> Timestamp {
    let spread = configuration.heartbeatMaximum - configuration.heartbeatMinimum
    let jitter = spread > .zero ? Int64.random(in: 0...Int64(spread / .milliseconds(1)), using: &random) : 0
    return now.advanced(by: configuration.heartbeatMinimum + .milliseconds(jitter))
  }

  /// When a queue was last used, counting a parked poll as use right now.
  private func effectiveContact(_ slot: Int, now: Timestamp) -> Timestamp {
    table.store[slot: slot].hasParkedPoll ? now : table.store[slot: slot].lastContact
  }

  /// Drops heartbeat entries of polls that have ended from the front of the heap, so ``nextDeadline`` names
  /// a poll still waiting (entries further back are skipped when they come due).
  private mutating func discardEndedHeartbeats() {
    while let (_, pollID) = heartbeats.first, parkedPolls[pollID] == nil {
      heartbeats.pop()
    }
    if parkedPolls.isEmpty { heartbeats = DeadlineHeap() }
  }

  /// Appends an event to a queue, dropping the queue instead if it is full, and wakes its parked poll
  /// (unless `wake` is false: the caller answers it once the whole command is queued).
  mutating func push(
    _ body: EventBody<Event>,
    origin: MutationOrigin? = nil,
    author: UserID? = nil,
    to slot: Int,
    wake: Bool = true,
    now: Timestamp,
    actions: inout [Action]
  ) {
    let entry = table.add(body, author: author, origin: origin)
    if give(entry, to: slot, joinsPrevious: table.store.joinsPrevious(entry), actions: &actions) {
      table.store.settle(entry, heldBy: 1, author: author)
    }
    table.dropIfUnheld(entry)
    if wake, table.store.isOccupied(slot), let parked = table.store[parkedPollOf: slot] {
      completeParkedPoll(parked.pollID, on: slot, now: now, actions: &actions)
    }
  }

  /// Gives stored event `entry` to the queue in `slot`, dropping the queue instead if it is full (its client
  /// registers again and reloads). The caller counts the queues that took it with
  /// ``QueueStore/settle(_:heldBy:author:)``.
  /// - Returns: Whether the queue took it.
  private mutating func give(_ entry: Int, to slot: Int, joinsPrevious: Bool, actions: inout [Action]) -> Bool {
    guard table.store.take(entry, in: slot, limit: configuration.maximumEventsPerQueue, joinsPrevious: joinsPrevious)
    else {
      removeQueue(slot, actions: &actions)
      return false
    }
    return true
  }

  /// Completes a parked poll with the queue's contents, up to the poll's limit.
  private mutating func completeParkedPoll(
    _ pollID: PollID,
    on slot: Int,
    now: Timestamp,
    actions: inout [Action]
  ) {
    let limit = table.store[parkedPollOf: slot]?.limit
    parkedPolls[pollID] = nil
    table.store[parkedPollOf: slot] = nil
    actions.append(.completePoll(pollID, .events(table.events(slot, limit: limit))))
    discardEndedHeartbeats()
  }

  /// Removes a queue, failing its parked poll, and tells the application when it was the user's last.
  mutating func removeQueue(_ slot: Int, notifyApplication: Bool = true, actions: inout [Action]) {
    let (queue, parkedPoll, wasUsersLast) = table.remove(slot: slot)
    if let parked = parkedPoll {
      parkedPolls[parked.pollID] = nil
      actions.append(.completePoll(parked.pollID, .failed(.badEventQueueID(queue.id))))
      discardEndedHeartbeats()
    }
    if wasUsersLast, notifyApplication { application.lastQueueRemoved(for: queue.user) }
  }
}
