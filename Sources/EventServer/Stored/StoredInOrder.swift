import Foundation
import Synchronization

extension EventServer {
  /// One stored input a caller hands the server: its work in the transaction, and its decision on the
  /// machine (see ``runStored(on:readsSnapshot:work:decide:)``).
  struct StoredStep<Work: Sendable, Value: Sendable>: Sendable {
    /// Whether the work reads what a registration, a fetch or a read answers (``StoredInput/readsSnapshot``).
    var readsSnapshot = false
    /// The application's statements.
    var work: @Sendable (any DatabaseTransaction) async throws -> Work
    /// The decision, in one synchronous step on the machine, with what `work` returned or threw.
    var decide: @Sendable (isolated EventServer, Result<Work, any Error>) throws -> Value
  }

  /// Runs `steps` as consecutive stored inputs, in order, and answers once every one is committed or has
  /// failed: a device's batch of writes shares its transactions (one commit, one sync, for up to
  /// ``StoredBatches/maximumBatch`` inputs) instead of taking one each.
  ///
  /// Each step runs under its own savepoint and is decided before the next, as if alone. Once a decision
  /// satisfies `stopsAfter`, the steps after it are not run (no work, no decision).
  /// - Returns: Each step's outcome, in order; `nil` for a step not run after a stop.
  /// - Throws: ``ServerLogError`` before anything runs, when the log has failed or just failed.
  func runStoredInOrder<Work: Sendable, Value: Sendable>(
    on log: any TransactionalServerLog,
    _ steps: [StoredStep<Work, Value>],
    stopsAfter: @escaping @Sendable (Result<Value, any Error>) -> Bool = { _ in false }
  ) async throws -> [Result<Value, any Error>?] {
    try checkLogHealthy()
    if case .clusterNode = deployment { try checkTurnsAvailable() } else { try checkStoredAvailable() }
    guard !steps.isEmpty else { return [] }
    return await withCheckedContinuation { continuation in
      let answers = StoredAnswers<Value>(count: steps.count, continuation: continuation)
      for (index, step) in steps.enumerated() {
        let input = StoredInput(
          run: { transaction, batch in
            if answers.isStopped { return .decided(keep: false, answer: { answers.settle(index, with: nil) }) }
            let worked: Result<Work, any Error>
            do {
              worked = .success(try await step.work(transaction))
            } catch let refused as DatabaseError where refused.isSerializationFailure {
              return .conflicted(refused)
            } catch {
              worked = .failure(error)
            }
            let decided = await self.decideStored(in: batch) { server in try step.decide(server, worked) }
            if stopsAfter(decided) { answers.stop() }
            let keep: Bool
            if case .success = worked, case .success = decided { keep = true } else { keep = false }
            return .decided(keep: keep, answer: { answers.settle(index, with: decided) })
          },
          fail: { answers.settle(index, with: .failure($0)) },
          readsSnapshot: step.readsSnapshot
        )
        storedBatches.waiting.append(input)
      }
      switch deployment {
      case .clusterNode:
        // A cluster node runs them in its next turn, holding the append lock, on current state.
        startTurnIfNeeded()
      case .singleServer(let durability):
        guard !storedBatches.isRunning else { return }
        storedBatches.isRunning = true
        Task { await self.runStoredBatches(on: log, durability) }
      case .inMemory:
        // A stored application is served only from a database (``serving(_:from:configuration:clock:anchor:random:pushGateway:snapshots:)``).
        let failure = ServerLogError.storage("this server keeps no application state in a database")
        for input in storedBatches.waiting { input.fail(failure) }
        storedBatches.waiting = []
      }
    }
  }
}

/// The outcomes of stored inputs one caller handed in together, gathered until the last is known.
///
/// Each input settles its slot once (answered after its commit, failed with its transaction, or skipped
/// after a stop); the caller is resumed once, when the last slot settles.
final class StoredAnswers<Value: Sendable>: Sendable {
  /// Each input's outcome, in order; `nil` for one skipped.
  typealias Outcomes = [Result<Value, any Error>?]

  private struct State {
    var outcomes: Outcomes
    var settled: [Bool]
    var remaining: Int
    var isStopped = false
    var continuation: CheckedContinuation<Outcomes, Never>?
  }

  private let state: Mutex<State>

  init(count: Int, continuation: CheckedContinuation<Outcomes, Never>) {
    state = Mutex(
      State(
        outcomes: Array(repeating: nil, count: count),
        settled: Array(repeating: false, count: count),
        remaining: count,
        continuation: continuation
      )
    )
  }

  /// Whether a decision stopped the inputs after it.
  var isStopped: Bool { state.withLock(\.isStopped) }

  /// The inputs not yet run are skipped.
  func stop() {
    state.withLock { $0.isStopped = true }
  }

  /// Input `index` came to `outcome` (`nil`: skipped); resumes the caller when it was the last.
  func settle(_ index: Int, with outcome: Result<Value, any Error>?) {
    let finished = state.withLock { state -> (CheckedContinuation<Outcomes, Never>, Outcomes)? in
      guard !state.settled[index] else { return nil }
      state.settled[index] = true
      state.outcomes[index] = outcome
      state.remaining -= 1
      guard state.remaining == 0, let continuation = state.continuation else { return nil }
      state.continuation = nil
      return (continuation, state.outcomes)
    }
    if let (continuation, outcomes) = finished { continuation.resume(returning: outcomes) }
  }
}
