import EventProtocol
import Foundation

extension EventServer where Application: Codable {
  /// Starts a cluster node on a log several nodes share: the newest snapshot, then every record after it
  /// applied; from then on the node follows the log and decides in turns (see ``SharedServerLog``).
  ///
  /// A node that joins running nodes adds no recovery record and skips no event ids: nothing a node decides
  /// is answered before its turn commits, so the log holds every decision any client has seen, and a client
  /// whose node died goes on with the same queue and `last_event_id` on another one. The first node of a
  /// cluster starting again (no other node holds a place, ``SharedServerLog/claimPlaceInCluster()``) records
  /// a recovery, as a single server does: the database may have been restored while every node was down.
  ///
  /// ```swift
  /// let log = InMemorySharedLog()
  /// let (nodeA, _) = try await EventServer.joining(log, application: NoteBoard(), clock: clock)
  /// let (nodeB, _) = try await EventServer.joining(log, application: NoteBoard(), clock: clock)
  /// let registration = try await nodeA.register(user: "alice")
  /// let events = try await nodeB.events(queueID: registration.queueID, user: "alice", lastEventID: -1, dontBlock: true)
  /// ```
  /// - Parameters:
  ///   - log: The log the nodes share.
  ///   - application: The application when the log is empty.
  ///   - configuration: Limits and timings (the same on every node).
  ///   - clock: The clock for heartbeats, expiry, sweeps and the slow read of the log.
  ///   - anchor: The timestamp the clock's current instant stands for; the wall clock's when `nil`.
  ///   - random: The source of queue ids and heartbeat jitter.
  ///   - pushGateway: Where the pushes this node decides go.
  ///   - replication: How the node follows the log, and how often it writes a snapshot.
  /// - Returns: The node, and what the log held when it started.
  /// - Throws: ``ServerLogError`` when the log cannot be read or used; nothing stored is changed then.
  public static func joining(
    _ log: any SharedServerLog,
    application: Application,
    configuration: EventServerConfiguration = .init(),
    clock: C,
    anchor: Timestamp? = nil,
    random: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
    pushGateway: any PushGateway = NoPushGateway(),
    replication: ReplicationSettings = .init()
  ) async throws(ServerLogError) -> (EventServer, LogRecoveryReport) {
    let timeline = Timeline(clock: clock, anchor: anchor)
    let startsCluster = try await log.claimPlaceInCluster()
    let stored = try await log.load()
    var (machine, report) = try Machine.rebuilding(
      from: stored,
      application: application,
      configuration: configuration,
      random: random,
      now: timeline.now()
    )
    if let torn = report.tornPosition { throw .damaged(position: torn) }
    machine.startRecording()
    let durability = Durability(
      log: log,
      commit: GroupCommit(durable: report.lastPosition),
      encodeSnapshot: { (machine, position) throws(ServerLogError) in try machine.snapshot(position: position).encoded()
      },
      snapshotDebt: SnapshotDebt(schedule: replication.snapshots, after: stored, report: report)
    )
    let node = ClusterNode(
      log: log.clusterLog,
      settings: replication,
      latestTime: timeline.now(),
      rebuild: { (stored, now, random) throws(ServerLogError) in
        try Machine.rebuilding(
          from: stored,
          application: application,
          configuration: configuration,
          random: random,
          now: now
        )
      }
    )
    let server = EventServer(
      machine: machine,
      timeline: timeline,
      pushGateway: pushGateway,
      deployment: .clusterNode(durability, node)
    )
    await server.startFollowing()
    if startsCluster { try await server.recordClusterStart() }
    return (server, report)
  }

  /// The first node of a cluster that starts again cannot prove that the shared log did not go back while
  /// every node was down (a database restored from an older dump): it decides a recovery in its first turn,
  /// so every queue's ids skip a random distance (``EventServerStateMachine/recover(now:)``). A client that
  /// saw ids the log no longer holds is refused and registers again; the others keep their queues.
  private func recordClusterStart() async throws(ServerLogError) {
    do {
      try await decide { ((), self.finish(self.machine.recover(now: self.decisionNow()))) }
    } catch {
      if let node = deployment.clusterNode { stopFollowing(node) }
      if let error = error as? ServerLogError { throw error }
      throw .storage("the first turn of a node starting the cluster failed: \(error)")
    }
  }
}

extension EventServer {
  /// Whether this server is a node of a cluster (``joining(_:application:configuration:clock:anchor:random:pushGateway:replication:)``).
  public var isClusterNode: Bool { deployment.clusterNode != nil }

  /// The time decisions are taken at: the clock's, but never before an entry already applied.
  func decisionNow() -> Timestamp {
    let now = timeline.now()
    guard let node = deployment.clusterNode else { return now }
    let latest = max(now, node.latestTime)
    node.latestTime = latest
    return latest
  }

  /// Runs `body` on the machine and waits until what it recorded is durable: at once on a single server,
  /// in the next turn on a cluster node.
  /// - Parameter body: Performs one input and returns its result and the log position its effects need
  ///   (what ``finish(_:)`` returned).
  func decide<T: Sendable>(_ body: @escaping () throws -> (T, UInt64)) async throws -> T {
    guard case .clusterNode(_, let node) = deployment else {
      let (value, position) = try body()
      try await waitUntilDurable(position)
      return value
    }
    try checkLogHealthy()
    try checkTurnsAvailable()
    let (value, position, machineEpoch) = try await withCheckedThrowingContinuation {
      (continuation: CheckedContinuation<(T, UInt64, Int), any Error>) in
      enqueueDecision(
        on: node,
        run: {
          let epoch = node.turns.rejoins
          continuation.resume(with: Result { try body() }.map { ($0.0, $0.1, epoch) })
        },
        fail: { continuation.resume(throwing: $0) }
      )
    }
    // The caller resumes after the turn that decided: the node may have dropped that state meanwhile (a
    // turn whose outcome it could not learn), and the position is then one of the old state's.
    try checkSameMachine(node, as: machineEpoch)
    try await waitUntilDurable(position)
    return value
  }

  /// Throws when the node rebuilt itself from the log, or is rebuilding, since a decision taken on the
  /// state `epoch` counted (``logRejoins`` then).
  private func checkSameMachine(_ node: ClusterNode, as epoch: Int) throws(ServerLogError) {
    if let failure = node.turns.rejoiningAfter { throw failure }
    guard node.turns.rejoins == epoch else {
      throw .storage("the node rebuilt itself from the log before this decision was known durable: send it again")
    }
  }

  /// Adds an input to `node`'s next turn, starting one when none is under way.
  func enqueueDecision(on node: ClusterNode, run: @escaping () -> Void, fail: @escaping (ServerLogError) -> Void) {
    node.waiting.append(ClusterNode.Decision(run: run, fail: fail))
    startTurnIfNeeded()
  }

  /// Throws while the last turn's failure is fresh: the request fails at once instead of waiting for a
  /// database that did not answer a moment ago.
  func checkTurnsAvailable() throws(ServerLogError) {
    if let failure = turnsUnavailable() { throw failure }
  }

  /// The log's failure, or on a cluster node the last turn's failure while it is fresh (see
  /// ``checkTurnsAvailable()``).
  func turnsUnavailable() -> ServerLogError? {
    if let failure = logFailure { return failure }
    return deployment.clusterNode?.turns.refusal(now: timeline.now())
  }

  // MARK: - Turns

  /// Starts a turn when inputs wait and none is under way (cluster nodes only; nothing to do otherwise).
  func startTurnIfNeeded() {
    guard case .clusterNode(let durability, let node) = deployment else { return }
    let inputsWaiting = !node.waiting.isEmpty || !storedBatches.waiting.isEmpty
    start(node.turns.inputsWaiting(inputsWaiting), durability, node)
  }

  /// Performs the cycle's ``TurnCycle/Start``.
  private func start(_ start: TurnCycle.Start, _ durability: Durability, _ node: ClusterNode) {
    guard case .startTurn(let number) = start else { return }
    let position = durability.commit.durable
    Task { await self.runTurn(number, durability, node, after: position) }
  }

  private func runTurn(_ number: Int, _ durability: Durability, _ node: ClusterNode, after position: UInt64) async {
    do {
      if applicationStorage.driver != nil, let transactional = node.log.transactional {
        // A stored application's inputs run in the turn's transaction, after everything else it decides.
        let isolation = storedTurnIsolation()
        try await transactional.appendTurn(after: position, isolation: isolation) {
          (committed, transaction) throws(ServerLogError) in
          _ = try await self.decideTurn(number, after: committed)
          return try await self.decideStoredInTurn(number, in: transaction)
        }
      } else {
        try await node.log.shared.appendTurn(after: position) { committed throws(ServerLogError) in
          try await self.decideTurn(number, after: committed)
        }
      }
      turnCommitted(number, durability, node)
    } catch {
      turnFailed(number, durability, node, with: error)
    }
  }

  /// In the turn, holding the log's lock: applies what other nodes committed, then decides every input
  /// that waited, on state that is current; returns the records to append.
  private func decideTurn(_ number: Int, after committed: [StoredRecord]) throws(ServerLogError) -> [StoredRecord] {
    guard case .clusterNode(let durability, let node) = deployment, node.turns.isActive(number),
      durability.commit.failure == nil
    else {
      throw .storage("the turn was abandoned at its deadline")
    }
    try applyCommitted(committed, durability, node)
    node.turns.turnDecided(number)
    let decisions = node.waiting
    node.waiting = []
    for decision in decisions { decision.run() }
    return durability.commit.gatherWrite()?.records ?? []
  }

  private func turnCommitted(_ number: Int, _ durability: Durability, _ node: ClusterNode) {
    guard node.turns.turnCommitted(number) == .answer else { return }
    if durability.commit.isWriting {
      _ = durability.commit.writeSucceeded()
      releaseDurable(durability)
    }
    answerStoredTurn()
    noteCaughtUpIfSo()
    resumeTurnEndWaiters(node)
    if durability.snapshotDebt.isDue { snapshotBetweenTurns(durability) }
    startTurnIfNeeded()
  }

  private func turnFailed(_ number: Int, _ durability: Durability, _ node: ClusterNode, with error: ServerLogError) {
    let outcome = node.turns.turnFailed(
      number,
      with: error,
      logStopped: durability.commit.failure != nil,
      now: timeline.now(),
      refuseFor: node.settings.retryAfterFailure
    )
    if outcome == .ignore { return }
    failStoredInputs(with: error)
    resumeTurnEndWaiters(node)
    switch outcome {
    case .ignore:
      return
    case .rejoin:
      // What this turn decided may or may not be in the log (a commit whose answer was lost, a database
      // slower than the deadline): the node is ahead of the log. It drops its state and rebuilds it from
      // the log; every request waiting on the turn fails, and none was answered.
      startRejoining(after: error, durability, node)
    case .failWaiting:
      logFailed(error)
      failDecisionsWaiting(node, with: error)
    case .failWaitingAndRefuseUntil:
      // Nothing was decided: the node is as current as the log; the waiting requests fail (clients retry
      // after backing off) and, for a moment, so do new ones.
      failDecisionsWaiting(node, with: error)
    }
  }

  private func failDecisionsWaiting(_ node: ClusterNode, with error: ServerLogError) {
    let waiting = node.waiting
    node.waiting = []
    for decision in waiting { decision.fail(error) }
  }

  /// Resumes what waited for the turn under way to end (``waitBetweenTurns()``).
  private func resumeTurnEndWaiters(_ node: ClusterNode) {
    let waiters = node.turnEndWaiters
    node.turnEndWaiters = []
    for waiter in waiters { waiter.resume() }
  }

  // MARK: - Following the log

  /// Applies records other nodes committed, in order, skipping those already applied: polls parked here
  /// complete when an event reaches their queue.
  /// - Throws: ``ServerLogError`` for a gap (records dropped behind a snapshot while this node was behind)
  ///   or an undecodable record; the node has stopped then.
  private func applyCommitted(
    _ records: [StoredRecord],
    _ durability: Durability,
    _ node: ClusterNode
  ) throws(ServerLogError) {
    var applied = false
    for record in records {
      let durable = durability.commit.durable
      if record.position <= durable { continue }
      do throws(ServerLogError) {
        guard record.position == durable + 1 else { throw ServerLogError.gap(after: durable, next: record.position) }
        let reading: ServerLogCodec.Reading<Application.Command> = try ServerLogCodec.decode(
          record.bytes,
          at: record.position
        )
        guard case .entry(let entry) = reading else { throw ServerLogError.damaged(position: record.position) }
        let actions = machine.applyCommitted(entry)
        node.latestTime = max(node.latestTime, entry.time)
        durability.commit.adopt(through: record.position)
        durability.snapshotDebt.recorded(count: 1, bytes: record.bytes.count)
        applied = true
        perform(actions)
      } catch {
        logFailed(error)
        throw error
      }
    }
    if applied { noteCaughtUpIfSo() }
    if applied, !durability.appendWaiters.isEmpty { resumeAppendWaiters(durability) }
  }

  /// Starts the task that reads what other nodes commit: at each hint from the log, and at least every
  /// ``ReplicationSettings/followInterval``.
  func startFollowing() {
    guard let node = deployment.clusterNode else { return }
    let log = node.log.shared
    let partition = node.log.partition
    let settings = node.settings
    node.follower = Task { [weak self, timeline] in
      var woken = FollowerWake.timer
      // Partition 0 runs a stored application's deadlines and looks for new ones (``lookForStoredDeadline()``).
      let looksForDeadlines = partition.map { $0.partitions.count > 1 && $0.partitionIndex == 0 } ?? false
      var nextDeadlineLook = timeline.now()
      while !Task.isCancelled {
        guard let position = await self?.followingPosition() else { return }
        var next = position
        // A hint that announced only this node's own commit has nothing to read: the timer reads anyway.
        if woken != .append || log.announcedPosition > position || log.announcedPosition == 0,
          let records = try? await log.records(after: position, limit: settings.readLimit), !records.isEmpty
        {
          await self?.follow(records)
          next = records.last!.position
          if records.count == settings.readLimit { continue }
        }
        // Messages another partition left in this one's inbox are taken by a turn (``PartitionedSharedLog``);
        // looked for when its hint or the timer wakes the follower, not at every append.
        if woken != .append, let partition, (try? await partition.hasInbox()) == true {
          await self?.inboxHasMessages()
        }
        if looksForDeadlines, timeline.now() >= nextDeadlineLook {
          nextDeadlineLook = timeline.now().advanced(by: settings.followInterval)
          // Not awaited: the look is a stored input, which waits for a turn, and a turn may wait for this follower.
          Task { await self?.lookForStoredDeadline() }
        }
        let readThrough = next
        woken = await withTaskGroup(of: FollowerWake.self) { group in
          group.addTask {
            await log.waitForAppends(after: readThrough)
            return .append
          }
          group.addTask {
            try? await timeline.sleep(until: timeline.now().advanced(by: settings.followInterval))
            return .timer
          }
          if let partition {
            group.addTask {
              await partition.waitForInbox()
              return .inbox
            }
          }
          let first = await group.next() ?? .timer
          group.cancelAll()
          return first
        }
      }
    }
  }

  /// What woke a follower.
  private enum FollowerWake: Sendable {
    case append
    case timer
    case inbox
  }

  /// Starts a turn to take the partition's inbox (a stored application's node; see ``PartitionedSharedLog``).
  private func inboxHasMessages() {
    guard case .clusterNode(let durability, let node) = deployment, applicationStorage.driver != nil,
      durability.commit.failure == nil, !isShuttingDown
    else { return }
    start(node.turns.inboxAnnounced(), durability, node)
  }

  /// Where the follower reads from; `nil` once the node stopped.
  private func followingPosition() -> UInt64? {
    guard case .clusterNode(let durability, let node) = deployment, durability.commit.failure == nil,
      node.turns.rejoiningAfter == nil, !isShuttingDown
    else { return nil }
    return durability.commit.durable
  }

  private func follow(_ records: [StoredRecord]) {
    // During a turn the records are applied by the turn itself (it holds the lock, so it reads them too).
    // A node rebuilding itself reads the log again from its new state (a follower cancelled then may still
    // bring what it read before).
    guard case .clusterNode(let durability, let node) = deployment, node.turns.followerMayApply,
      durability.commit.failure == nil, !Task.isCancelled
    else { return }
    try? applyCommitted(records, durability, node)
    if durability.snapshotDebt.isDue, !node.turns.isTurnUnderWay { snapshotBetweenTurns(durability) }
  }

  func stopFollowing(_ node: ClusterNode) {
    node.follower?.cancel()
    node.rejoinTask?.cancel()
  }

  // MARK: - Snapshots

  /// Suspends until no turn is under way (the machine then holds exactly what the log holds); at once
  /// for a server that is not a cluster node.
  func waitBetweenTurns() async {
    guard let node = deployment.clusterNode else { return }
    while node.turns.isTurnUnderWay {
      await withCheckedContinuation { node.turnEndWaiters.append($0) }
    }
  }

  /// Encodes the state now (between turns: exactly the log through ``durablePosition``) and stores it in the
  /// background; a failure is kept in ``snapshotFailure`` and the log still holds everything.
  private func snapshotBetweenTurns(_ durability: Durability) {
    guard let bytes = try? durability.encodeSnapshot(machine, durability.commit.durable) else {
      // Not encodable now: counted as taken, so the next try waits for as much work again.
      durability.snapshotDebt.snapshotTaken(bytes: durability.snapshotDebt.snapshotBytes)
      return
    }
    durability.snapshotDebt.snapshotTaken(bytes: bytes.count)
    let snapshot = StoredSnapshot(position: durability.commit.durable, bytes: bytes)
    let log = durability.log
    Task {
      do throws(ServerLogError) {
        try await log.saveSnapshot(snapshot)
      } catch {
        self.snapshotFailed(error, durability)
      }
    }
  }

  private func snapshotFailed(_ error: ServerLogError, _ durability: Durability) {
    durability.snapshotFailure = error
  }

  /// A cluster node's ``saveSnapshot()``: between turns, the state at the committed position.
  func saveSharedSnapshot(_ durability: Durability, _ node: ClusterNode) async throws(ServerLogError) {
    await waitBetweenTurns()
    try checkLogHealthy()
    // A node rebuilding itself holds nothing the log does not: there is nothing of its own to save.
    guard node.turns.rejoiningAfter == nil else { return }
    let position = durability.commit.durable
    let bytes = try durability.encodeSnapshot(machine, position)
    durability.snapshotDebt.snapshotTaken(bytes: bytes.count)
    try await durability.log.saveSnapshot(StoredSnapshot(position: position, bytes: bytes))
  }
}
