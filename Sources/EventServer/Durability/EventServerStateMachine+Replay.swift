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
    recorded!.append(ServerLogEntry(time: now, input: input()))
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
    case .recovered:
      actions += applyRecovered(now: now)
    }
    return actions
  }

  /// The server starts again from durable state (a snapshot and the inputs replayed after it): every queue
  /// skips its event ids past any a lost incarnation may have handed out, its idle time restarts now (the
  /// crash must not expire anybody's queue), and each queue that accepts `restart` events gets one.
  ///
  /// The skipped ids are `nextEventID ..< max(nextEventID + 2²⁰, now in microseconds since the epoch)`.
  /// A poll acknowledging one of them comes from a client that saw events this server no longer has (its
  /// last records were lost, or an operator restored older state): the queue is refused with
  /// `BAD_EVENT_QUEUE_ID` and the client re-registers. New ids start above every id a lost incarnation can
  /// have reached, provided the wall clock at this recovery is later than at the previous one by more
  /// microseconds than events any one queue received in between.
  ///
  /// A queue that has skipped ``EventQueue/maximumSkippedRanges`` times without a poll acknowledging past
  /// them is removed instead (its client re-registers).
  /// - Returns: The actions (parked polls of removed queues failing; none after a real restart).
  public mutating func recover(now: Timestamp) -> [Action] {
    record(.recovered, now: now)
    return applyRecovered(now: now)
  }

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
  mutating func applyRecovered(now: Timestamp) -> [Action] {
    var actions: [Action] = []
    let microseconds = now.sinceEpoch.components.seconds.multipliedReportingOverflow(by: 1_000_000)
    let clockMark = microseconds.overflow ? 0 : max(0, Int(microseconds.partialValue))
    for queueID in table.store.sortedIDs {
      let slot = table.store.slot(of: queueID)!
      guard table.store[slot: slot].skippedIDs.count < EventQueue<Event>.maximumSkippedRanges else {
        removeQueue(slot, actions: &actions)
        continue
      }
      let nextID = table.store[slot: slot].nextEventID
      let skipTo = min(max(nextID + 1 << 20, clockMark), EventQueue<Event>.maximumEventID)
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
