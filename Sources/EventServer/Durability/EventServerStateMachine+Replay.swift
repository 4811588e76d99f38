import EventProtocol

/// The state machine's durable side: recording inputs for the input log, replaying them, recovering after a
/// restart, and the applications of recorded decisions that the live inputs and replay share.
///
/// Every durable change goes through one of the `apply…` functions below or through a recomputation that
/// depends on durable state only (a command, a mutation's verdict), and is recorded as one
/// ``ServerLogEntry``. Replaying the entries through ``replay(_:)`` therefore rebuilds the same durable
/// state, which ``snapshot()`` captures; `ReplayPropertyTests` holds this over random inputs.
extension EventServerStateMachine {
  /// Whether inputs are being recorded for an input log.
  public var isRecording: Bool { recorded != nil }

  /// Starts recording every input that changes durable state; ``takeRecordedEntries()`` hands them out.
  /// A server without an input log never records (and pays nothing for it).
  public mutating func startRecording() {
    if recorded == nil { recorded = [] }
  }

  /// The entries recorded since the last call, oldest first, for the shell to append to the log.
  /// - Complexity: O(1).
  public mutating func takeRecordedEntries() -> [ServerLogEntry<Application.Command>] {
    guard let entries = recorded, !entries.isEmpty else { return [] }
    recorded = []
    return entries
  }

  /// Records one input when recording. The input is made only then: building it (a generic enum) cost a
  /// run-time metadata lookup per request on a server that keeps no log.
  mutating func record(_ input: @autoclosure () -> ServerInput<Application.Command>, now: Timestamp) {
    guard recorded != nil else { return }
    // The acknowledgements made since the last record go first: replay prunes the queues where they were.
    recordAcknowledgements(now: now)
    recorded!.append(ServerLogEntry(time: now, input: input()))
  }

  /// Notes a poll's acknowledgement, recorded later (``UnrecordedAcknowledgements``), or at once when the
  /// flush interval is zero. Nothing is noted by a server that keeps no log.
  mutating func noteAcknowledgement(_ queueID: QueueID, lastEventID: Int?, now: Timestamp) {
    guard recorded != nil else { return }
    unrecordedAcknowledgements.note(
      queueID,
      lastEventID: lastEventID,
      at: now,
      interval: configuration.acknowledgementFlushInterval
    )
    if configuration.acknowledgementFlushInterval <= .zero { recordAcknowledgements(now: now) }
  }

  /// Records the acknowledgements not yet recorded, if any, as one entry.
  mutating func recordAcknowledgements(now: Timestamp) {
    guard recorded != nil, !unrecordedAcknowledgements.isEmpty else { return }
    recorded!.append(ServerLogEntry(time: now, input: .acknowledgements(unrecordedAcknowledgements.take())))
  }

  /// When the acknowledgements not yet recorded must be recorded at the latest; `nil` when there are none.
  public var acknowledgementsDueAt: Timestamp? { unrecordedAcknowledgements.dueAt }

  /// Records every acknowledgement not yet recorded (what a shell does before it stops).
  public mutating func flushAcknowledgements(now: Timestamp) {
    recordAcknowledgements(now: now)
  }

  /// Applies a recorded input, as the live server applied it. Nothing is recorded, and the actions are
  /// dropped: no poll is parked during replay, and pushes that were due then are long gone.
  ///
  /// Inputs that name a queue which no longer exists are skipped for that queue, as the live server did.
  public mutating func replay(_ entry: ServerLogEntry<Application.Command>) {
    _ = applyEntry(entry)
  }

  /// Applies a record another node of a cluster committed (``SharedServerLog``), as ``replay(_:)`` does,
  /// but keeps what it does to this node's parked polls: a poll parked here completes when the entry
  /// queued an event for it (or removed its queue). Pushes are left to the node that decided the entry.
  /// - Returns: The polls to complete.
  public mutating func applyCommitted(_ entry: ServerLogEntry<Application.Command>) -> [Action] {
    applyEntry(entry).filter { action in
      if case .sendPush = action { return false }
      return true
    }
  }

  private mutating func applyEntry(_ entry: ServerLogEntry<Application.Command>) -> [Action] {
    let wasRecording = recorded
    recorded = nil
    defer { recorded = wasRecording }
    let now = entry.time
    var actions: [Action] = []
    switch entry.input {
    case .registered(let user, let queueID, let eventTypes, let idleTimeout, let clientID, let evicted):
      guard table.store.slot(of: queueID) == nil else { return [] }
      _ = applyRegistered(
        user: user,
        queueID: queueID,
        eventTypes: eventTypes,
        idleTimeout: idleTimeout,
        clientID: clientID,
        evicted: evicted,
        now: now,
        actions: &actions
      )
    case .mutationReceived(let user, let clientID, let mutationID, let digest, let command):
      let decided = try? decideMutation(
        command,
        from: MutationSource(user: user, clientID: clientID),
        mutationID: mutationID,
        digest: digest,
        now: now
      )
      actions += decided?.1 ?? []
    case .commandHandled(let user, let command):
      actions += (try? handle(command, from: user, origin: nil, now: now)) ?? []
    case .acknowledged(let queueID, let lastEventID):
      guard let slot = table.store.slot(of: queueID) else { return [] }
      applyAcknowledged(slot: slot, lastEventID: lastEventID, now: now)
    case .acknowledgements(let acknowledgements):
      for acknowledgement in acknowledgements {
        guard let slot = table.store.slot(of: acknowledgement.queueID) else { continue }
        if let lastEventID = acknowledgement.lastEventID { table.prune(slot: slot, through: lastEventID) }
        table.store[slot: slot].lastContact = max(table.store[slot: slot].lastContact, acknowledgement.contact)
      }
    case .heartbeatsSent(let queueIDs):
      applyHeartbeats(queueIDs, now: now, actions: &actions)
    case .queuesRemoved(let queueIDs):
      for queueID in queueIDs {
        if let slot = table.store.slot(of: queueID) { removeQueue(slot, actions: &actions) }
      }
    case .swept(let expired):
      applySwept(expired: expired, now: now, actions: &actions)
    case .pushTokenRegistered(let token, let user, let clientID, let platform):
      pushRegistry.register(token: token, platform: platform, for: MutationSource(user: user, clientID: clientID))
    case .pushTokenInvalidated(let token):
      pushRegistry.tokenInvalid(token)
    case .applicationDeadlineReached:
      deliver(application.deadlineReached(at: now), from: nil, origin: nil, now: now, actions: &actions)
    case .deadlineDecided(let command):
      applyDeadlineDecided(command, now: now, actions: &actions)
    case .recovered(let idSkip):
      actions += applyRecovered(now: now, idSkip: idSkip)
    }
    return actions
  }

  /// The server starts again from durable state (a snapshot and the inputs replayed after it), or a cluster
  /// node joins its shared log: every queue skips a random distance of event ids, its idle time restarts now
  /// (the crash must not expire anybody's queue), and each queue that accepts `restart` events gets one.
  ///
  /// Nothing here rests on the wall clock. The distance is drawn from the server's random source, in
  /// ``idSkipRange`` (2²⁰ to 2⁴⁰), and recorded, so replay skips the same. Storage that went back (a crash
  /// that lost its last records, a restored backup, a node of a cluster whose database was restored) may
  /// have been served by a lost incarnation that started from the same state and handed out ids after its
  /// own skip; this recovery's skip is another draw, so the two ranges of ids overlap only if the draws fall
  /// within as many ids of each other as events were handed out (for a queue given 10⁶ events by the lost
  /// incarnation, a chance below 2 × 10⁻⁶). A client that saw the lost incarnation then polls with an id
  /// that this queue skipped, or one beyond its newest id: either proves it saw events this server does not
  /// have, and the queue is refused with `BAD_EVENT_QUEUE_ID` (the client registers again).
  ///
  /// A queue that has skipped `EventQueue/maximumSkippedRanges` times without a poll acknowledging past
  /// them, or whose ids would pass `EventQueue/maximumEventID`, is removed instead (its client re-registers).
  /// - Returns: The actions (parked polls of removed queues failing; none after a real restart).
  public mutating func recover(now: Timestamp) -> [Action] {
    let idSkip = Int.random(in: Self.idSkipRange, using: &random)
    record(.recovered(idSkip: idSkip), now: now)
    return applyRecovered(now: now, idSkip: idSkip)
  }

  /// How far a recovery moves every queue's next event id: drawn anew at each recovery.
  public static var idSkipRange: ClosedRange<Int> { (1 << 20)...(1 << 40) }

  // MARK: - Applying decisions (shared by the live inputs and replay)

  /// Removes the evicted queues and creates the new one.
  mutating func applyRegistered(
    user: UserID,
    queueID: QueueID,
    eventTypes: Set<String>?,
    idleTimeout: Duration,
    clientID: ClientID?,
    evicted: [QueueID],
    now: Timestamp,
    actions: inout [Action]
  ) -> EventQueue<Event> {
    for id in evicted {
      if let slot = table.store.slot(of: id) { removeQueue(slot, actions: &actions) }
    }
    let queue = EventQueue<Event>(
      id: queueID,
      user: user,
      clientID: clientID,
      eventTypes: eventTypes,
      idleTimeout: idleTimeout,
      now: now
    )
    _ = table.insert(queue)
    return queue
  }

  /// Prunes through the acknowledged id (already validated) and counts the contact.
  mutating func applyAcknowledged(slot: Int, lastEventID: Int?, now: Timestamp) {
    if let lastEventID { table.prune(slot: slot, through: lastEventID) }
    table.store[slot: slot].lastContact = now
  }

  /// Queues a heartbeat in each queue (which counts as contact) and wakes its parked poll.
  mutating func applyHeartbeats(_ queueIDs: [QueueID], now: Timestamp, actions: inout [Action]) {
    for queueID in queueIDs {
      guard let slot = table.store.slot(of: queueID) else { continue }
      table.store[slot: slot].lastContact = now
      push(.heartbeat, to: slot, now: now, actions: &actions)
    }
  }

  /// Removes the expired queues in id order, forgets old mutation memory and schedules the next sweep.
  mutating func applySwept(expired: [QueueID], now: Timestamp, actions: inout [Action]) {
    for queueID in expired {
      if let slot = table.store.slot(of: queueID) { removeQueue(slot, actions: &actions) }
    }
    mutationMemory.forget(seenBefore: now.advanced(by: configuration.mutationMemoryLifetime.saturatingNegated))
    nextSweepAt = now.advanced(by: configuration.sweepInterval)
  }

  /// Skips every queue's ids, restarts idle times and queues `restart` events (see ``recover(now:)``).
  /// `idSkip` absent: a recovery recorded before skips were drawn, replayed as it ran then (to the clock).
  mutating func applyRecovered(now: Timestamp, idSkip: Int?) -> [Action] {
    var actions: [Action] = []
    let microseconds = now.sinceEpoch.components.seconds.multipliedReportingOverflow(by: 1_000_000)
    let clockMark = microseconds.overflow ? 0 : max(0, Int(microseconds.partialValue))
    for queueID in table.store.sortedIDs {
      let slot = table.store.slot(of: queueID)!
      let nextID = table.store[slot: slot].nextEventID
      let skipTo: Int
      if let idSkip {
        let (sum, overflow) = nextID.addingReportingOverflow(idSkip)
        guard !overflow, sum <= EventQueue<Event>.maximumEventID else {
          removeQueue(slot, actions: &actions)
          continue
        }
        skipTo = sum
      } else {
        skipTo = min(max(nextID + 1 << 20, clockMark), EventQueue<Event>.maximumEventID)
      }
      guard table.store[slot: slot].skippedIDs.count < EventQueue<Event>.maximumSkippedRanges else {
        removeQueue(slot, actions: &actions)
        continue
      }
      table.store[slot: slot].skipIDs(upTo: skipTo)
      table.store[slot: slot].lastContact = now
    }
    for queueID in table.store.sortedIDs {
      let slot = table.store.slot(of: queueID)!
      if table.store[slot: slot].accepts(EventBody<Event>.restartType) {
        push(.restart, to: slot, now: now, actions: &actions)
      }
    }
    nextSweepAt = now.advanced(by: configuration.sweepInterval)
    return actions
  }
}
