import EventProtocol
import Foundation

/// A stored application's inputs waiting for the database, and the batch under way.
///
/// Inputs are taken in arrival order, up to ``maximumBatch`` at a time, into one transaction: each runs under
/// a savepoint of its own (its writes roll back alone when it fails or is refused), and is decided on the
/// machine before the next one starts, so each input sees exactly the inputs before it, as if alone. The
/// batch's log records are appended at its end and the batch commits once: one sync for all of them, as the
/// group commit does for an in-memory application.
struct StoredBatches {
  /// The most inputs one transaction takes (a PostgreSQL transaction must end within the log's deadline).
  static var maximumBatch: Int { 64 }

  var waiting: [StoredInput] = []
  var isRunning = false
  /// The number of the last batch started.
  var number = 0
  /// The number of the batch whose transaction is open, if one is: a transaction abandoned at its deadline
  /// whose work ends later must not decide on the machine (its number is no longer open).
  var open: Int?
  /// Whether the open batch decided anything on the machine (a failed commit must then stop the server).
  var decided = false
  /// After a transaction the database did not complete (unreachable, out of time), inputs fail at once for a
  /// moment, instead of each waiting for the database's deadline in turn.
  var failFast = FailFast()
  /// A cluster node's inputs run in the turn under way (answered when it commits, failed when it does not).
  var inTurn: [StoredInput] = []
  /// How to answer them once the turn commits.
  var turnAnswers: [@Sendable () -> Void] = []
  /// The turn's inputs to run again in the next turn (a serialization failure, and those after it), in
  /// order; back at the head of ``waiting`` once the turn commits.
  var runAgain: [StoredInput] = []
  /// What the turn under way reads of other partitions' commits; `nil` off a partitioned log.
  var turnIsolation: TurnIsolation?
  /// Callers of ``EventServer/waitForWrites()`` waiting for the batches to stop.
  var idleWaiters: [CheckedContinuation<Void, Never>] = []
}

/// One stored input in a batch: its work and decision, and how its caller is answered.
struct StoredInput: Sendable {
  /// Runs the work in the transaction and the decision on the server (batch `number`).
  let run: @Sendable (any DatabaseTransaction, Int) async -> StoredInputRun
  /// Answers the caller with a failure: the batch did not commit, or never started.
  let fail: @Sendable (any Error) -> Void
  /// Whether it reads what a registration, a fetch or an operator's read returns: on a partitioned log it
  /// runs in a turn of one snapshot (``TurnIsolation/oneSnapshot``).
  let readsSnapshot: Bool
  /// How many times the database refused its work for a concurrent transaction (``StoredInputRun/conflicted(_:)``).
  var conflicts = 0

  /// The most times a cluster node runs an input again after a serialization failure before failing it. A
  /// write refused in a turn of one snapshot runs first in a turn of each statement's, where a serialization
  /// failure cannot happen; a deadlock (`40P01`) still can, between an application's own statements.
  static var maximumConflicts: Int { 3 }
}

/// What running one stored input in a transaction came to.
enum StoredInputRun: Sendable {
  /// It was decided (or refused): whether its writes are kept, and how to answer its caller once the
  /// transaction commits.
  case decided(keep: Bool, answer: @Sendable () -> Void)
  /// Its work failed on a serialization failure (``DatabaseError/isSerializationFailure``): nothing was
  /// decided, its writes roll back, and a later transaction may run it again.
  case conflicted(DatabaseError)

  /// Whether the input's writes are kept (it was decided and accepted).
  var keepsWrites: Bool {
    if case .decided(keep: true, _) = self { true } else { false }
  }
}

extension EventServer {
  /// Runs one stored input in the next batch, and answers once that batch committed.
  ///
  /// `work` runs in the transaction (the application's statements; `readsSnapshot` when it reads what a
  /// registration, a fetch or a read answers); `decide` then runs on the machine in one
  /// synchronous step with what `work` returned or threw. When `work` throws or `decide` throws, the
  /// input's writes roll back (to its savepoint) and its caller gets `decide`'s error; the other inputs of
  /// the batch are not affected. When the batch does not commit, every caller in it gets the failure, and if
  /// anything was decided the log has failed (the machine is ahead of the database): the server stops, and a
  /// restart recovers from what committed.
  /// - Returns: What `decide` returned, once committed.
  func runStored<Work: Sendable, Value: Sendable>(
    on log: any TransactionalServerLog,
    readsSnapshot: Bool = false,
    work: @escaping @Sendable (any DatabaseTransaction) async throws -> Work,
    decide: @escaping @Sendable (isolated EventServer, Result<Work, any Error>) throws -> Value
  ) async throws -> Value {
    let outcomes = try await runStoredInOrder(
      on: log,
      [StoredStep(readsSnapshot: readsSnapshot, work: work, decide: decide)]
    )
    guard let outcome = outcomes.first, let outcome else {
      throw ServerLogError.storage("a stored input was not run")
    }
    return try outcome.get()
  }

  /// Throws while the last stored transaction's failure is fresh (``StoredBatches/failFast``).
  func checkStoredAvailable() throws(ServerLogError) {
    if let failure = storedBatches.failFast.refusal(now: timeline.now()) { throw failure }
  }

  func runStoredBatches(on log: any TransactionalServerLog, _ durability: Durability) async {
    while !storedBatches.waiting.isEmpty {
      let batch = Array(storedBatches.waiting.prefix(StoredBatches.maximumBatch))
      storedBatches.waiting.removeFirst(batch.count)
      await runStoredBatch(batch, on: log, durability)
    }
    storedBatches.isRunning = false
    let waiters = storedBatches.idleWaiters
    storedBatches.idleWaiters = []
    for waiter in waiters { waiter.resume() }
  }

  /// Suspends until no write to the log is under way, no stored input waits or runs, and no turn of a
  /// cluster node is under way: what a host that closes the log itself calls after ``shutdown()``, so that nothing is
  /// written to a closed database. Returns at once once the log has failed.
  public func waitForWrites() async {
    while let durability = deployment.durability, durability.commit.failure == nil {
      if storedBatches.isRunning {
        await withCheckedContinuation { storedBatches.idleWaiters.append($0) }
      } else if deployment.clusterNode?.turns.isTurnUnderWay == true {
        await waitBetweenTurns()
      } else if durability.commit.isWriting {
        try? await waitUntilWritten(durability)
      } else {
        return
      }
    }
  }

  private func runStoredBatch(
    _ batch: [StoredInput],
    on log: any TransactionalServerLog,
    _ durability: Durability
  ) async {
    do {
      try checkStoredAvailable()
      try checkLogHealthy()
      while durability.commit.isWriting { try await waitUntilWritten(durability) }
      try checkLogHealthy()
    } catch {
      for input in batch { input.fail(error) }
      return
    }
    durability.commit.reserve()
    storedBatches.number += 1
    let number = storedBatches.number
    storedBatches.open = number
    storedBatches.decided = false
    do {
      let answers = try await log.transaction { transaction in
        var answers: [@Sendable () -> Void] = []
        for input in batch {
          try await transaction.execute("SAVEPOINT stored_input")
          let run = await input.run(transaction, number)
          if !run.keepsWrites { try await transaction.execute("ROLLBACK TO SAVEPOINT stored_input") }
          switch run {
          case .decided(_, let answer):
            answers.append(answer)
          case .conflicted(let refused):
            // One server is the only writer of its database: nothing to wait out, the caller is told.
            answers.append { input.fail(ServerLogError.storage("\(refused)")) }
          }
          try await transaction.execute("RELEASE SAVEPOINT stored_input")
        }
        let records = try await self.gatherStoredRecords(in: number)
        if !records.isEmpty { try await transaction.append(records) }
        return answers
      }
      storedBatches.open = nil
      writerReleased(durability)
      for answer in answers { answer() }
    } catch {
      storedBatches.open = nil
      let failure =
        (error as? ServerLogError) ?? .storage("a stored application's transaction did not commit: \(error)")
      if storedBatches.decided {
        logFailed(failure)
      } else {
        writerReleased(durability)
        // The database did not complete the transaction: what waits behind it fails at once for a second.
        storedBatches.failFast.failed(with: failure, now: timeline.now(), for: .seconds(1))
      }
      for input in batch { input.fail(failure) }
    }
  }

  /// Runs one input's decision on the machine, when its batch's transaction is still open.
  func decideStored<Value: Sendable>(
    in batch: Int,
    _ decide: @Sendable (isolated EventServer) throws -> Value
  ) -> Result<Value, any Error> {
    guard storedBatches.open == batch else {
      return .failure(ServerLogError.storage("the input's transaction was abandoned at its deadline"))
    }
    let before = appendedPosition
    let result = Result { try decide(self) }
    // Recorded: the machine now holds a decision that must commit with the application's writes.
    if appendedPosition > before { storedBatches.decided = true }
    return result.mapError { error in
      // A refused statement: nothing was decided, the client may send it again (answered 503 on the wire).
      if let refused = error as? DatabaseError { return ServerLogError.storage("\(refused)") }
      return error
    }
  }

  /// The batch's records (its inputs' and any other input's decided meanwhile), for its transaction.
  private func gatherStoredRecords(in batch: Int) throws(ServerLogError) -> [StoredRecord] {
    guard case .singleServer(let durability) = deployment, storedBatches.open == batch else {
      throw .storage("the batch's transaction was abandoned at its deadline")
    }
    let records = durability.commit.gatherReserved()
    if !records.isEmpty { storedBatches.decided = true }
    return records
  }

  /// The reserved write ended (committed, or rolled back with nothing decided): what waited is written next.
  private func writerReleased(_ durability: Durability) {
    let next = durability.commit.writeSucceeded()
    releaseDurable(durability)
    if let next { startWriting(next, to: durability) }
  }
}
