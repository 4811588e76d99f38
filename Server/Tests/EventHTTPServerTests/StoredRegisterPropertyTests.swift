import EventProtocol
import EventServer
import Foundation
import SampleApps
import TestScheduling
import Testing

/// Registrations racing commands against a stored application: for every seed, every registration's snapshot
/// followed by the events its queue received must equal what the database holds for that user at the end,
/// in order: nothing missing (an event before the queue existed that the snapshot lacks), nothing twice (an
/// event whose row the snapshot already had).
@Suite(
  "Atomic register against a database: snapshot plus events equals the tables' truth",
  .serialized,
  .hangGuard
)
struct StoredRegisterPropertyTests {
  static let users: [UserID] = ["alice", "bob", "carol"]

  enum Step: Sendable {
    case post(text: String, from: UserID, to: [UserID])
    case register(UserID)
  }

  /// Three lanes of steps among `users` drawn from `seed`, run at the same time.
  static func lanes(seed: UInt64, users: [UserID] = users) -> [[Step]] {
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

  typealias Node = EventServer<StoredRelay<StoredNoteBoard>, ContinuousClock>

  @Test("registrations racing posts", arguments: cases)
  func registrationsRacingPosts(_ backend: StoredBackend, _ seed: UInt64) async throws {
    let database = try await backend.scratch()
    let log = try await database.open()
    let server = try await EventServer.serving(StoredNoteBoard(), from: log, clock: ContinuousClock()).0
    try await Self.check(seed: seed, writers: [server, server, server], readers: [server, server, server])
    await server.shutdown()
    await server.waitForWrites()
    await database.close(log)
  }

  @Test(
    "registrations racing posts on three PostgreSQL nodes: each lane writes through one node, registers through another",
    .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
    arguments: Array(UInt64(1)...6)
  )
  func acrossNodes(_ seed: UInt64) async throws {
    let database = try await StoredBackend.postgres.scratch()
    var logs: [any TransactionalServerLog] = []
    var nodes: [Node] = []
    for _ in 0..<3 {
      let log = try await database.open()
      let shared = try #require(log as? any TransactionalSharedLog)
      logs.append(log)
      nodes.append(try await EventServer.joining(StoredNoteBoard(), on: shared, clock: ContinuousClock()).0)
    }
    try await Self.check(seed: seed, writers: nodes, readers: [nodes[1], nodes[2], nodes[0]])
    for node in nodes {
      await node.shutdown()
      await node.waitForWrites()
    }
    for log in logs { await database.close(log) }
  }

  /// Runs the seed's lanes at once, lane `i` writing through `writers[i]` and registering through
  /// `readers[i]`, then checks every registration against the table, polling through a third node.
  static func check(seed: UInt64, writers: [Node], readers: [Node]) async throws {
    try await check(
      seed: seed,
      users: users,
      writer: { lane, _ in writers[lane] },
      reader: { lane, _ in readers[lane] },
      poller: { index, _ in writers[index % writers.count] },
      settle: {}
    )
  }

  /// Runs the seed's lanes among `users` at once, each post through `writer(lane, sender)` and each
  /// registration through `reader(lane, user)`; once `settle` returns (every delivery made), checks every
  /// registration's snapshot and events against the table, polling the `i`th registration's queue through
  /// `poller(i, registrar)` (by default the node it registered on). With `inOrder` false the notes are
  /// compared as sets: on a partitioned log, notes from authors of different partitions reach a queue in
  /// the order their partitions delivered them, which is not the order of the table's ids.
  static func check(
    seed: UInt64,
    users: [UserID],
    writer: @escaping @Sendable (Int, UserID) -> Node,
    reader: @escaping @Sendable (Int, UserID) -> Node,
    poller: (Int, Node) -> Node = { _, registrar in registrar },
    inOrder: Bool = true,
    settle: () async throws -> Void
  ) async throws {
    let registered = try await withThrowingTaskGroup(of: [(Registered, Node)].self) { group in
      for (lane, steps) in Self.lanes(seed: seed, users: users).enumerated() {
        group.addTask {
          var registered: [(Registered, Node)] = []
          for (index, step) in steps.enumerated() {
            switch step {
            case .post(let text, let sender, let recipients):
              _ = try await writer(lane, sender).applyMutation(
                .request(.post(text, to: recipients)),
                from: sender,
                clientID: ClientID(rawValue: "lane-\(lane)"),
                mutationID: MutationID(UInt64(index + 1))
              )
            case .register(let user):
              let registrar = reader(lane, user)
              let registration = try await registrar.register(user: user)
              registered.append(
                (
                  Registered(user: user, queueID: registration.queueID, snapshot: registration.snapshot?.notes ?? []),
                  registrar
                )
              )
            }
          }
          return registered
        }
      }
      return try await group.reduce(into: []) { $0 += $1 }
    }
    try await settle()
    for (index, (registration, registrar)) in registered.enumerated() {
      let server = poller(index, registrar)
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
        inOrder ? combined == truth : combined.sorted() == truth.sorted(),
        "seed \(seed): \(registration.user)'s snapshot \(registration.snapshot) then events \(received), database \(truth)"
      )
    }
  }
}
