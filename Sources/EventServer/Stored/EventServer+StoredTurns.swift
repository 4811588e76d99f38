import EventProtocol
import Foundation

/// A cluster node's stored inputs: run in its turn, in the turn's transaction, after the node applied what
/// the other nodes committed and decided what waited; they commit with the turn, or fail with it.
extension EventServer {
  /// Runs up to ``StoredBatches/maximumBatch`` waiting stored inputs in turn `number`'s transaction, each
  /// under its own savepoint and decided before the next, and returns the turn's whole write (what the turn
  /// decided before them and what they decided).
  func decideStoredInTurn(
    _ number: Int,
    in transaction: any LogTransaction
  ) async throws(ServerLogError) -> [StoredRecord] {
    guard case .clusterNode(let durability, let node) = deployment, node.turns.isActive(number),
      durability.commit.failure == nil
    else {
      throw .storage("the turn was abandoned at its deadline")
    }
    // Deliveries other partitions' commands left for this partition's users, delivered once: the records
    // that queue them commit with the messages' removal.
    if let inbox = transaction as? any PartitionedLogTransaction, let receive = applicationStorage.driver?.receive {
      let messages = try await inbox.takeInbox()
      guard node.turns.isActive(number), durability.commit.failure == nil else {
        throw .storage("the turn was abandoned at its deadline")
      }
      if !messages.isEmpty { try receive(self, messages) }
    }
    var batch = Array(storedBatches.waiting.prefix(StoredBatches.maximumBatch))
    if storedBatches.turnIsolation == .eachStatement, let read = batch.firstIndex(where: \.readsSnapshot) {
      // A read that came after the turn began waits for a turn of one snapshot.
      batch = Array(batch[..<read])
    }
    storedBatches.waiting.removeFirst(batch.count)
    storedBatches.inTurn = batch
    storedBatches.turnAnswers = []
    storedBatches.open = number
    var again: [StoredInput] = []
    do {
      for (index, input) in batch.enumerated() {
        try await transaction.execute("SAVEPOINT stored_input")
        let run = await input.run(transaction, number)
        if !run.keepsWrites { try await transaction.execute("ROLLBACK TO SAVEPOINT stored_input") }
        try await transaction.execute("RELEASE SAVEPOINT stored_input")
        switch run {
        case .decided(_, let answer):
          storedBatches.turnAnswers.append(answer)
        case .conflicted(let refused):
          // Another partition's turn changed what this input read or writes since this turn's snapshot
          // (partitioned turns are REPEATABLE READ): it runs again in the next turn, on a new snapshot, and
          // the inputs after it wait with it, so each device's inputs are still decided in order.
          var retried = input
          retried.conflicts += 1
          if retried.conflicts < StoredInput.maximumConflicts {
            again = [retried] + batch[(index + 1)...]
          } else {
            storedBatches.turnAnswers.append { input.fail(ServerLogError.storage("\(refused)")) }
            again = Array(batch[(index + 1)...])
          }
        }
        if !again.isEmpty { break }
      }
    } catch {
      throw .storage("a stored input's savepoint failed: \(error)")
    }
    guard node.turns.isActive(number), storedBatches.open == number else {
      throw .storage("the turn was abandoned at its deadline")
    }
    storedBatches.runAgain = again
    return durability.commit.gatherWrite()?.records ?? []
  }

  /// What the next turn's statements see (``TurnIsolation``), on a partitioned log: one snapshot when the
  /// first input waiting is a registration, a fetch or a read (atomic with the inbox the turn takes), each
  /// statement's when it is a write (that turn takes the inputs before the first read). A write refused in
  /// a turn of one snapshot comes first in the next turn, which is of each statement's: it cannot be
  /// refused twice, however many registrations keep coming.
  func storedTurnIsolation() -> TurnIsolation {
    guard partitionRoute() != nil else {
      storedBatches.turnIsolation = nil
      return .eachStatement
    }
    let isolation: TurnIsolation = storedBatches.waiting.first?.readsSnapshot == true ? .oneSnapshot : .eachStatement
    storedBatches.turnIsolation = isolation
    return isolation
  }

  /// The turn committed: its stored inputs are answered.
  func answerStoredTurn() {
    let answers = storedBatches.turnAnswers
    storedBatches.turnAnswers = []
    storedBatches.inTurn = []
    storedBatches.open = nil
    storedBatches.waiting.insert(contentsOf: storedBatches.runAgain, at: 0)
    storedBatches.runAgain = []
    for answer in answers { answer() }
    // Inputs that arrived during the turn go in the next one.
    if !storedBatches.waiting.isEmpty { startTurnIfNeeded() }
  }

  /// The turn did not commit (or the node is rebuilding itself): its stored inputs fail, and so do those
  /// waiting for a turn (clients retry; a node that cannot reach its database fails at once meanwhile).
  func failStoredInputs(with failure: ServerLogError) {
    let inputs = storedBatches.inTurn + storedBatches.waiting
    storedBatches.inTurn = []
    storedBatches.waiting = []
    storedBatches.runAgain = []
    storedBatches.turnAnswers = []
    storedBatches.open = nil
    for input in inputs { input.fail(failure) }
  }
}
