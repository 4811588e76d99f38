import EventProtocol
import Foundation

extension EventServer where Application: Codable {
  /// Starts a durable server from its input log: the newest snapshot, then every record after it replayed,
  /// then a recovery (every queue skips its event ids past any a lost incarnation may have handed out, see
  /// ``EventServerStateMachine/recover(now:)``), made durable before this returns.
  ///
  /// From then on every input that changes durable state is appended to the log (requests arriving together
  /// share one write), and no answer or push leaves before the records it depends on are durable: a
  /// mutation answered is never lost, and an event id a client has seen is never handed out again.
  ///
  /// ```swift
  /// let log = InMemoryServerLog()
  /// let (server, report) = try await EventServer.recovering(from: log, application: NoteBoard(), clock: clock)
  /// ```
  /// - Parameters:
  ///   - log: Where the records and snapshots are kept.
  ///   - application: The application when the log is empty.
  ///   - configuration: Limits and timings.
  ///   - clock: The clock for heartbeats, expiry and sweeps.
  ///   - anchor: The timestamp the clock's current instant stands for; the wall clock's when `nil`.
  ///   - random: The source of queue ids and heartbeat jitter.
  ///   - pushGateway: Where push notifications go.
  ///   - snapshots: When the server writes a snapshot by itself (restart time follows it).
  /// - Returns: The server, and what the log held.
  /// - Throws: ``ServerLogError`` when the log cannot be read or used (damaged, of a newer build, with a gap);
  ///   nothing stored is changed then.
  public static func recovering(
    from log: any ServerLog,
    application: Application,
    configuration: EventServerConfiguration = .init(),
    clock: C,
    anchor: Timestamp? = nil,
    random: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
    pushGateway: any PushGateway = NoPushGateway(),
    snapshots: SnapshotSchedule = .byWork
  ) async throws(ServerLogError) -> (EventServer, LogRecoveryReport) {
    let timeline = Timeline(clock: clock, anchor: anchor)
    try await log.claimForOneServer()
    let stored = try await log.load()
    var (machine, report) = try Machine.rebuilding(
      from: stored,
      application: application,
      configuration: configuration,
      random: random,
      now: timeline.now()
    )
    if report.tornPosition != nil { try await log.truncate(after: report.lastPosition) }
    machine.startRecording()
    let actions = machine.recover(now: timeline.now())
    let durability = Durability(
      log: log,
      commit: GroupCommit(durable: report.lastPosition),
      encodeSnapshot: { (machine, position) throws(ServerLogError) in try machine.snapshot(position: position).encoded()
      },
      snapshotDebt: SnapshotDebt(schedule: snapshots, after: stored, report: report)
    )
    let server = EventServer(
      machine: machine,
      timeline: timeline,
      pushGateway: pushGateway,
      deployment: .singleServer(durability)
    )
    try await server.completeRecovery(actions)
    return (server, report)
  }

  private func completeRecovery(_ actions: [Machine.Action]) async throws(ServerLogError) {
    try await waitUntilDurable(finish(actions))
  }
}

extension EventServer {
  /// Whether the server keeps an input log.
  public var isDurable: Bool { deployment.durability != nil }

  /// The last log position known durable (0 without a log).
  public var durablePosition: UInt64 { deployment.durability?.commit.durable ?? 0 }

  /// Why the log stopped accepting records, if it did: the server then refuses every request, and must be
  /// restarted (it recovers from what is durable).
  public var logFailure: ServerLogError? { deployment.durability?.commit.failure }

  /// The last log position given to a record (0 without a log); ahead of ``durablePosition`` while a write
  /// is under way.
  public var appendedPosition: UInt64 { deployment.durability?.commit.appended ?? 0 }

  /// Why the last snapshot could not be stored, if it could not (the log still holds everything).
  public var snapshotFailure: ServerLogError? { deployment.durability?.snapshotFailure }

  /// Suspends until the log fails (for a host that stops the process then).
  /// - Returns: The failure; `nil` when the waiting task is cancelled first (or the server has no log).
  public func waitForLogFailure() async -> ServerLogError? {
    guard let durability = deployment.durability else { return nil }
    if let failure = durability.commit.failure { return failure }
    let id = nextFailureWaiterID
    nextFailureWaiterID += 1
    return await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        if Task.isCancelled {
          continuation.resume(returning: nil)
        } else {
          durability.failureWaiters.append((id, continuation))
        }
      }
    } onCancel: {
      Task { await self.cancelFailureWaiter(id) }
    }
  }

  private func cancelFailureWaiter(_ id: Int) {
    guard let durability = deployment.durability,
      let index = durability.failureWaiters.firstIndex(where: { $0.id == id })
    else { return }
    durability.failureWaiters.remove(at: index).continuation.resume(returning: nil)
  }

  /// Writes a snapshot of the state now (after the records before it), and waits until it is stored, so a
  /// restart replays only what comes after. A host calls it on shutdown and now and then.
  /// - Throws: ``ServerLogError`` when the snapshot or the records before it could not be stored.
  public func saveSnapshot() async throws(ServerLogError) {
    switch deployment {
    case .inMemory:
      return
    case .clusterNode(let durability, let node):
      return try await saveSharedSnapshot(durability, node)
    case .singleServer(let durability):
      try checkLogHealthy()
      let bytes = try durability.encodeSnapshot(machine, durability.commit.appended)
      durability.snapshotDebt.snapshotTaken(bytes: bytes.count)
      durability.snapshotFailure = nil
      let position = durability.commit.appended
      if let write = durability.commit.enqueueSnapshot(bytes) { startWriting(write, to: durability) }
      // A snapshot-only write advances no position: wait for the write after which no write is under way.
      try await waitUntilDurable(position)
      while durability.commit.isWriting { try await waitUntilWritten(durability) }
      if let failure = durability.snapshotFailure { throw failure }
    }
  }

  /// Suspends until records through `position` have been given to the log (durable or not): lets a test
  /// act once a number of requests are under way, without sleeping.
  public func waitUntilAppended(through position: UInt64) async {
    guard let durability = deployment.durability, durability.commit.appended < position else { return }
    await withCheckedContinuation { durability.appendWaiters.append((position, $0)) }
  }

  /// Suspends until at least `count` requests' answers wait for the log to be durable (a poll whose
  /// events are not yet durable, say): lets a test act once a request is held, without sleeping.
  public func waitForAnswersHeld(count: Int) async {
    guard let durability = deployment.durability, durability.heldAnswers < count else { return }
    await withCheckedContinuation { durability.heldAnswerWaiters.append((count, $0)) }
  }

  func resumeHeldAnswerWaiters(_ durability: Durability) {
    let held = durability.heldAnswers
    var ready: [CheckedContinuation<Void, Never>] = []
    durability.heldAnswerWaiters.removeAll { waiter in
      guard waiter.count <= held else { return false }
      ready.append(waiter.continuation)
      return true
    }
    for continuation in ready { continuation.resume() }
  }

  func resumeAppendWaiters(_ durability: Durability) {
    let appended = durability.commit.appended
    var ready: [CheckedContinuation<Void, Never>] = []
    durability.appendWaiters.removeAll { waiter in
      guard waiter.position <= appended else { return false }
      ready.append(waiter.continuation)
      return true
    }
    for continuation in ready { continuation.resume() }
  }

  // MARK: - Shell

  /// Throws the log's failure, if it failed.
  func checkLogHealthy() throws(ServerLogError) {
    if let failure = logFailure { throw failure }
  }

  /// Suspends until the log is durable through `position` (at once without a log or when it already is).
  func waitUntilDurable(_ position: UInt64) async throws(ServerLogError) {
    guard let durability = deployment.durability else { return }
    if let failure = durability.commit.failure { throw failure }
    if position <= durability.commit.durable { return }
    do {
      try await withCheckedThrowingContinuation { durability.waiters.append((position, $0)) }
    } catch let error as ServerLogError {
      throw error
    } catch {
      throw .storage("\(error)")
    }
  }

  /// Suspends until the write under way ends.
  func waitUntilWritten(_ durability: Durability) async throws(ServerLogError) {
    try await waitUntilDurable(durability.commit.durable + 1)
  }

  /// Performs one write of a single server's group commit, then the next.
  func startWriting(_ write: GroupCommit.Write, to durability: Durability) {
    Task { await self.perform(write, on: durability) }
  }

  private func perform(_ write: GroupCommit.Write, on durability: Durability) async {
    do {
      if !write.records.isEmpty { try await durability.log.append(write.records) }
    } catch {
      logFailed(error)
      return
    }
    if let snapshot = write.snapshot {
      do {
        try await durability.log.saveSnapshot(snapshot)
      } catch {
        // Not fatal: the log still holds every record; the next snapshot tries again.
        durability.snapshotFailure = error
      }
    }
    let next = durability.commit.writeSucceeded()
    releaseDurable(durability)
    if let next { startWriting(next, to: durability) }
  }

  /// Performs the held actions and wakes the requests whose positions are now durable.
  func releaseDurable(_ durability: Durability) {
    let durable = durability.commit.durable
    var ready: [[Machine.Action]] = []
    while durability.gatedStart < durability.gated.count, durability.gated[durability.gatedStart].position <= durable {
      ready.append(durability.gated[durability.gatedStart].actions)
      durability.gatedStart += 1
    }
    if durability.gatedStart > 64, durability.gatedStart * 2 > durability.gated.count {
      durability.gated.removeFirst(durability.gatedStart)
      durability.gatedStart = 0
    }
    // Waiters are in position order too, except the "write ended" ones (position durable + 1): wake every
    // waiter whose position is durable, and those when no write is under way.
    let isIdle = !durability.commit.isWriting
    var woken: [CheckedContinuation<Void, any Error>] = []
    durability.waiters.removeAll { waiter in
      guard waiter.position <= durable || isIdle else { return false }
      woken.append(waiter.continuation)
      return true
    }
    for actions in ready { perform(actions) }
    for continuation in woken { continuation.resume() }
  }

  /// The log failed: nothing more becomes durable. Held answers are dropped (their polls end as cancelled,
  /// their requests fail), so nothing that a restart would undo is revealed. Nothing to do in memory.
  func logFailed(_ error: ServerLogError) {
    guard let durability = deployment.durability else { return }
    durability.commit.fail(error)
    let gated = durability.gated[durability.gatedStart...]
    durability.gated = []
    durability.gatedStart = 0
    let waiters = durability.waiters
    durability.waiters = []
    let failureWaiters = durability.failureWaiters
    durability.failureWaiters = []
    for (_, actions) in gated {
      for case .completePoll(let pollID, _) in actions { endPoll(pollID, with: .cancelled) }
    }
    for waiter in waiters { waiter.continuation.resume(throwing: error) }
    for waiter in failureWaiters { waiter.continuation.resume(returning: error) }
  }
}
