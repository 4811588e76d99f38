import EventProtocol
import Foundation

extension EventServer {
  /// Whether this cluster node is rebuilding itself from the shared log after a turn whose outcome it could
  /// not learn (see ``waitUntilRejoined()``): it refuses every request meanwhile, as a node whose database
  /// is unreachable does.
  public var isRejoiningLog: Bool { deployment.clusterNode?.turns.rejoiningAfter != nil }

  /// How many times this cluster node rebuilt itself from the shared log (0 for a single server).
  public var logRejoins: Int { deployment.clusterNode?.turns.rejoins ?? 0 }

  /// Suspends until this cluster node serves again after rebuilding itself from the log (at once when it is
  /// not rebuilding, or stopped for good).
  public func waitUntilRejoined() async {
    guard case .clusterNode(let durability, let node) = deployment, node.turns.rejoiningAfter != nil,
      durability.commit.failure == nil
    else { return }
    await withCheckedContinuation { node.rejoinWaiters.append($0) }
  }

  /// A turn failed after deciding: what it decided may or may not be in the log (the commit's answer was
  /// lost, or the database answered after the deadline), so the node's state may be ahead of the log and
  /// must not decide anything more. Everything waiting fails (nothing of the turn was answered: answers
  /// wait for the commit), requests fail at once, and the node rebuilds its state from the log, retrying
  /// with backoff while the log cannot be read. Clients keep their queues: the log holds every queue any
  /// client has seen. Only a log that is damaged (not merely unreachable) stops the node for good. The turn
  /// cycle is rejoining already (``TurnCycle/Failure/rejoin``).
  func startRejoining(after failure: ServerLogError, _ durability: Durability, _ node: ClusterNode) {
    node.follower?.cancel()
    failEverythingWaiting(with: failure, durability, node)
    let delay = node.settings.retryAfterFailure
    let firstAttempt = timeline.now().advanced(by: delay)
    node.rejoinTask = Task { await self.rejoin(durability, node, from: firstAttempt, delay: delay) }
  }

  /// Every request waiting on the machine being replaced fails with `failure`: decisions not yet taken,
  /// writes waiting to be durable, parked polls, and the answers held until a commit.
  private func failEverythingWaiting(with failure: ServerLogError, _ durability: Durability, _ node: ClusterNode) {
    let decisions = node.waiting
    node.waiting = []
    let waiters = durability.waiters
    durability.waiters = []
    durability.gated = []
    durability.gatedStart = 0
    for decision in decisions { decision.fail(failure) }
    for waiter in waiters { waiter.continuation.resume(throwing: failure) }
    failParkedPolls(with: failure)
    failStoredInputs(with: failure)
  }

  private func rejoin(
    _ durability: Durability,
    _ node: ClusterNode,
    from firstAttempt: Timestamp,
    delay: Duration
  ) async {
    var attempt = firstAttempt
    var delay = delay
    while !Task.isCancelled, !isShuttingDown {
      try? await timeline.sleep(until: attempt)
      guard !Task.isCancelled, !isShuttingDown else { return }
      do throws(ServerLogError) {
        let stored = try await durability.log.load()
        let (rebuilt, report) = try node.rebuild(stored, decisionNow(), machine.random)
        if let torn = report.tornPosition { throw .damaged(position: torn) }
        adopt(rebuilt, through: report.lastPosition, durability, node)
        return
      } catch {
        guard error.isSameKind(as: .storage("")) else {
          logFailed(error)
          resumeRejoinWaiters(node)
          return
        }
        delay = min(delay * 2, .seconds(30))
        attempt = timeline.now().advanced(by: delay)
      }
    }
  }

  /// Serves from `rebuilt`, the log's state through `position`.
  private func adopt(_ rebuilt: Machine, through position: UInt64, _ durability: Durability, _ node: ClusterNode) {
    machine = rebuilt
    machine.startRecording()
    durability.commit = GroupCommit(durable: position)
    durability.snapshotDebt = SnapshotDebt(schedule: durability.snapshotDebt.schedule)
    node.turns.rejoined()
    node.rejoinTask = nil
    noteCaughtUpIfSo()
    startFollowing()
    resumeRejoinWaiters(node)
    if !durability.appendWaiters.isEmpty { resumeAppendWaiters(durability) }
    rescheduleTimer()
    startTurnIfNeeded()
  }

  private func resumeRejoinWaiters(_ node: ClusterNode) {
    let waiters = node.rejoinWaiters
    node.rejoinWaiters = []
    for waiter in waiters { waiter.resume() }
  }
}
