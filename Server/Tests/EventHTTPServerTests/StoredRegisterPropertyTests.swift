import EventProtocol
import EventServer
import Foundation
import SampleApps
import Testing

/// Registrations racing commands against a stored application: for every seed, every registration's snapshot
/// followed by the events its queue received must equal what the database holds for that user at the end,
/// in order: nothing missing (an event before the queue existed that the snapshot lacks), nothing twice (an
/// event whose row the snapshot already had).
@Suite(
  "Atomic register against a database: snapshot plus events equals the tables' truth",
  .serialized,
  .timeLimit(.minutes(5))
)
struct StoredRegisterPropertyTests {
  static let users: [UserID] = ["alice", "bob", "carol"]

  enum Step: Sendable {
    case post(text: String, from: UserID, to: [UserID])
    case register(UserID)
  }

  /// Three lanes of steps drawn from `seed`, run at the same time.
  static func lanes(seed: UInt64) -> [[Step]] {
    var random = SeededRandomNumberGenerator(seed: seed)
    return (0..<3).map { lane in
      (0..<14).map { index in
        if Int.random(in: 0..<4, using: &random) == 0 {
          return .register(users.randomElement(using: &random)!)
        }
        let recipients = users.filter { _ in Bool.random(using: &random) }
        return .post(
          text: "s\(seed)-l\(lane)-\(index)",
          from: users.randomElement(using: &random)!,
          to: recipients.isEmpty ? [users[index % users.count]] : recipients
        )
      }
    }
  }

  struct Registered: Sendable {
    var user: UserID
    var queueID: QueueID
    var snapshot: [String]
  }

  static let cases: [(StoredBackend, UInt64)] =
    Array(1...12).map { (StoredBackend.sqlite, UInt64($0)) }
    + (testPostgresURL == nil ? [] : Array(1...6).map { (StoredBackend.postgres, UInt64($0)) })

  @Test("registrations racing posts", arguments: cases)
  func registrationsRacingPosts(_ backend: StoredBackend, _ seed: UInt64) async throws {
    let database = try await backend.scratch()
    let log = try await database.open()
    let server = try await EventServer.serving(StoredNoteBoard(), from: log, clock: ContinuousClock()).0
    let registered = try await withThrowingTaskGroup(of: [Registered].self) { group in
      for (lane, steps) in Self.lanes(seed: seed).enumerated() {
        group.addTask {
          var registered: [Registered] = []
          for (index, step) in steps.enumerated() {
            switch step {
            case .post(let text, let sender, let recipients):
              _ = try await server.applyMutation(
                .request(.post(text, to: recipients)),
                from: sender,
                clientID: ClientID(rawValue: "lane-\(lane)"),
                mutationID: MutationID(UInt64(index + 1))
              )
            case .register(let user):
              let registration = try await server.register(user: user)
              registered.append(
                Registered(user: user, queueID: registration.queueID, snapshot: registration.snapshot?.notes ?? [])
              )
            }
          }
          return registered
        }
      }
      return try await group.reduce(into: []) { $0 += $1 }
    }
    for registration in registered {
      let truth = try await server.readStoredState { try await StoredNoteBoard.notes(of: registration.user, in: $0) }
      let events = try await server.events(
        queueID: registration.queueID,
        user: registration.user,
        lastEventID: -1,
        dontBlock: true
      )
      let received = events.compactMap { envelope -> String? in
        if case .payload(.note(let text)) = envelope.body { text } else { nil }
      }
      let combined = registration.snapshot + received
      #expect(
        combined == truth,
        "seed \(seed): \(registration.user)'s snapshot \(registration.snapshot) then events \(received), database \(truth)"
      )
    }
    await server.shutdown()
    await database.close(log)
  }
}
