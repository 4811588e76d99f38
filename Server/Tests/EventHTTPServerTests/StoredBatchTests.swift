import EventProtocol
import EventServer
import Foundation
import SampleApps
import TestScheduling
import Testing

/// A device's batch of writes to a stored application is decided in shared transactions, each write under
/// its own savepoint: a refused write is undone alone and its refusal remembered; a write whose statement
/// fails is undone alone and stops the batch (no later write of the device decided before it); nothing is
/// applied twice after a restart.
@Suite(
  "A stored application's batch of writes in a database: each undone alone, the rest kept in order",
  .serialized,
  .hangGuard
)
struct StoredBatchTests {
  typealias Command = StoredCommand<NoteBoard.Command, NoteEvent>

  static func notes(
    on server: EventServer<StoredRelay<FailingStoredNoteBoard>, ContinuousClock>
  ) async throws -> [String] {
    try await server.readStoredState { try await StoredNoteBoard.notes(of: "alice", in: $0) }
  }

  @Test(
    "a batch with a refused and a failing write, then sent again after a restart",
    arguments: StoredBackend.available
  )
  func refusalsUndoneAlone(_ backend: StoredBackend) async throws {
    let database = try await backend.scratch()
    var log = try await database.open()
    var server = try await EventServer.serving(FailingStoredNoteBoard(), from: log, clock: ContinuousClock()).0
    let commands: [NoteBoard.Command] = (1...12).map { index in
      switch index {
      case 4: .forbidden
      case 8: .post("boom", to: ["alice"])
      default: .post("n\(index)", to: ["alice"])
      }
    }
    let batch = MutationBatch<Command>(
      requests: commands.enumerated().map { offset, command in
        MutationRequest(clientID: "bob-phone", mutationID: MutationID(UInt64(offset + 1)), mutation: .request(command))
      }
    )
    // Mutation 8 fails in its database, deciding nothing: the batch fails there, and 9 to 12 wait for it
    // (none is decided before it).
    await #expect(throws: ServerLogError.self) { try await server.applyMutations(batch, from: "bob") }
    #expect(try await Self.notes(on: server) == ["n1", "n2", "n3", "n5", "n6", "n7"])

    await server.shutdown()
    await server.waitForWrites()
    await database.close(log)
    log = try await database.open()
    server = try await EventServer.serving(FailingStoredNoteBoard(), from: log, clock: ContinuousClock()).0
    // The device gives up on 8 and sends the rest again: 1 to 7 are answered from the mutation memory
    // (nothing applied twice, the refusal the same), 9 to 12 are applied now.
    var again = batch
    again.requests.remove(at: 7)
    let outcomes = try await server.applyMutations(again, from: "bob")
    #expect(outcomes.count == 11)
    for (request, outcome) in zip(again.requests, outcomes) {
      let id = request.mutationID.rawValue
      switch outcome {
      case .acknowledged(_, let receipt): #expect(receipt.applied == (id > 8), "mutation \(id): \(receipt)")
      case .refused(_, let error): #expect(id == 4 && error.code == .badRequest, "mutation \(id): \(error)")
      }
    }
    let kept = (1...12).filter { $0 != 4 && $0 != 8 }.map { "n\($0)" }
    #expect(try await Self.notes(on: server) == kept)
    await server.shutdown()
    await server.waitForWrites()
    await database.close(log)
  }
}
