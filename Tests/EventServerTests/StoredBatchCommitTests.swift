import EventProtocol
import Foundation
import SampleApps
import Testing
import UpdateMachineTesting

@testable import EventServer

/// A device's batch of writes to a stored application shares its transactions: one commit (one sync) for
/// the batch, not one per write, each write still decided in order and at most once.
@Suite("A stored application's batch of writes: one transaction, decided in order, stopping after a reused id")
struct StoredBatchCommitTests {
  static func batch(
    _ mutations: [(UInt64, NoteBoard.Command)]
  ) -> MutationBatch<StoredRelay<NameOnlyStoredApplication>.Command> {
    MutationBatch(
      requests: mutations.map { id, command in
        MutationRequest(clientID: "alice-phone", mutationID: MutationID(id), mutation: .request(command))
      }
    )
  }

  @Test("32 writes in one batch are decided in one transaction, each acknowledged in order")
  func oneTransactionForABatch() async throws {
    let log = UnreachableTransactionalLog()
    let (server, _) = try await EventServer.serving(NameOnlyStoredApplication(), from: log, clock: ManualClock())
    let queue = try await server.register(user: "alice")
    let begun = log.begun
    let outcomes = try await server.applyMutations(
      Self.batch((1...32).map { (UInt64($0), .ping(to: ["alice"])) }),
      from: "alice"
    )
    #expect(outcomes.map(\.mutationID) == (1...32).map { MutationID(UInt64($0)) })
    #expect(outcomes.allSatisfy { if case .acknowledged(_, let receipt) = $0 { receipt.applied } else { false } })
    #expect(log.begun == begun + 1, "one transaction for the batch, not one per write")
    let events = try await server.events(queueID: queue.queueID, user: "alice", lastEventID: -1, dontBlock: true)
    #expect(events.filter { if case .payload(.ping) = $0.body { true } else { false } }.count == 32)
  }

  @Test("a reused id stops the batch: the writes after it are neither decided nor remembered")
  func reusedIDStopsTheBatch() async throws {
    let log = UnreachableTransactionalLog()
    let (server, _) = try await EventServer.serving(NameOnlyStoredApplication(), from: log, clock: ManualClock())
    let outcomes = try await server.applyMutations(
      Self.batch([(1, .ping(to: ["alice"])), (1, .ping(to: ["bob"])), (2, .ping(to: ["alice"]))]),
      from: "alice"
    )
    #expect(outcomes.count == 2)
    guard case .acknowledged(MutationID(1), let first) = outcomes.first else {
      Issue.record("the first write was not acknowledged: \(outcomes)")
      return
    }
    #expect(first.applied)
    #expect(
      {
        if case .refused(MutationID(1), let error) = outcomes.last { error.code == .mutationIDReused } else { false }
      }()
    )
    // Mutation 2 was not decided: sent again, it is applied now, not answered as a repeat.
    let again = try await server.applyMutations(Self.batch([(2, .ping(to: ["alice"]))]), from: "alice")
    #expect({ if case .acknowledged(MutationID(2), let receipt) = again.first { receipt.applied } else { false } }())
  }
}

extension MutationOutcome {
  fileprivate var mutationID: MutationID {
    switch self {
    case .acknowledged(let id, _), .refused(let id, _): id
    }
  }
}
