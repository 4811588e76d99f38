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
    guard durability!.shared!.activeTurn == number, durability!.commit.failure == nil else {
      throw .storage("the turn was abandoned at its deadline")
    }
    // Deliveries other partitions' commands left for this partition's users, delivered once: the records
    // that queue them commit with the messages' removal.
    if let inbox = transaction as? any PartitionedLogTransaction, let receive = storedDriver?.receive {
      let messages = try await inbox.takeInbox()
      guard durability!.shared!.activeTurn == number, durability!.commit.failure == nil else {
        throw .storage("the turn was abandoned at its deadline")
      }
      if !messages.isEmpty { try receive(self, messages) }
    }
    let batch = Array(storedBatches.waiting.prefix(StoredBatches.maximumBatch))
    storedBatches.waiting.removeFirst(batch.count)
    storedBatches.inTurn = batch
    storedBatches.turnAnswers = []
    storedBatches.open = number
    do {
      for input in batch {
        try await transaction.execute("SAVEPOINT stored_input")
        let (keep, answer) = await input.run(transaction, number)
        if !keep { try await transaction.execute("ROLLBACK TO SAVEPOINT stored_input") }
        try await transaction.execute("RELEASE SAVEPOINT stored_input")
        storedBatches.turnAnswers.append(answer)
      }
    } catch {
      throw .storage("a stored input's savepoint failed: \(error)")
    }
    guard durability!.shared!.activeTurn == number, storedBatches.open == number else {
      throw .storage("the turn was abandoned at its deadline")
    }
    return durability!.commit.gatherWrite()?.records ?? []
  }

  /// The turn committed: its stored inputs are answered.
  func answerStoredTurn() {
    let answers = storedBatches.turnAnswers
    storedBatches.turnAnswers = []
    storedBatches.inTurn = []
    storedBatches.open = nil
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
    storedBatches.turnAnswers = []
    storedBatches.open = nil
    for input in inputs { input.fail(failure) }
  }
}
