import EventProtocol
import SampleApps
import TestScheduling
import Testing
import UpdateMachineTesting

@testable import EventServer

/// docs/protocol.md, "Restart": after every restart of a durable server each queue's ids jump and each
/// queue that accepts `restart` gets a `restart` event after the events it held.
@Suite("A restart announces itself: ids jump, then a restart event", .hangGuard)
struct RestartAnnouncementTests {
  typealias Server = EventServer<NoteBoard, ManualClock>

  /// Three notes to bob's queue, the first acknowledged; then the server stops as `stop` says and starts
  /// again on the same log. Returns what bob's next polls get, to the restart event.
  func eventsAfterRestart(
    stop: (Server) async throws -> Void
  ) async throws -> (pending: [EventEnvelope<NoteEvent>], firstID: Int) {
    let log = InMemoryServerLog()
    let clock = ManualClock(start: t0)
    let server = try await startDurableServer(log, clock: clock)
    let registration = try await server.register(user: bob)
    for index in 1...3 {
      _ = try await server.applyMutation(
        .post("n\(index)", to: [bob]),
        from: alice,
        clientID: "c",
        mutationID: MutationID(rawValue: UInt64(index))
      )
    }
    let first = try await server.events(queueID: registration.queueID, user: bob, lastEventID: -1, dontBlock: true)
    _ = try await server.events(queueID: registration.queueID, user: bob, lastEventID: first[0].id, dontBlock: true)
    try await stop(server)

    let restarted = try await startDurableServer(log, clock: clock)
    var received: [EventEnvelope<NoteEvent>] = []
    var lastID = first[0].id
    // A client polls until it has seen the restart (each answer may stop at a jump in ids).
    for _ in 0..<4 where received.last?.body != .restart {
      let batch = try await restarted.events(
        queueID: registration.queueID,
        user: bob,
        lastEventID: lastID,
        dontBlock: true
      )
      received += batch
      lastID = batch.last?.id ?? lastID
    }
    return (received, first[0].id)
  }

  @Test("after a clean shutdown with a snapshot")
  func cleanShutdown() async throws {
    let (events, firstID) = try await eventsAfterRestart { server in
      try await server.saveSnapshot()
      await server.shutdown()
    }
    #expect(events.map(\.body).dropLast() == [.payload(.note(text: "n2")), .payload(.note(text: "n3"))])
    #expect(events.last?.body == .restart, "\(events)")
    #expect(events.map(\.id).dropLast() == [firstID + 1, firstID + 2])
    #expect((events.last?.id ?? 0) > firstID + 2 + (1 << 20) - 1, "no jump in ids: \(events.map(\.id))")
  }

  @Test("after a crash (no shutdown, no snapshot)")
  func crash() async throws {
    let (events, firstID) = try await eventsAfterRestart { _ in }
    #expect(events.map(\.body).dropLast() == [.payload(.note(text: "n2")), .payload(.note(text: "n3"))])
    #expect(events.last?.body == .restart, "\(events)")
    #expect((events.last?.id ?? 0) > firstID + 2 + (1 << 20) - 1, "no jump in ids: \(events.map(\.id))")
  }

  /// A cluster node on `log`, on a manual clock.
  func join(_ log: InMemorySharedLog) async throws -> Server {
    try await Server.joining(log, application: NoteBoard(), clock: ManualClock(start: t0), anchor: t0).0
  }

  @Test("a cluster starting again: its first node announces the restart; a node joining a running one does not")
  func clusterNodes() async throws {
    let log = InMemorySharedLog()
    let first = try await join(log)
    let queue = try await first.register(user: bob).queueID
    try await first.handle(.post("n1", to: [bob]), from: alice)
    let seen = try #require(try await first.events(queueID: queue, user: bob, lastEventID: -1, dontBlock: true).last)
    // A second node joining a running cluster: the same ids go on, no restart (no client saw one end).
    let joiner = try await join(log)
    try await joiner.handle(.post("n2", to: [bob]), from: alice)
    await first.waitUntilAppended(through: log.stored.records.last?.position ?? 0)
    let onJoiner = try await joiner.events(queueID: queue, user: bob, lastEventID: seen.id, dontBlock: true)
    #expect(onJoiner.map(\.body) == [.payload(.note(text: "n2"))])
    #expect(onJoiner.map(\.id) == [seen.id + 1])
    await first.shutdown()
    await joiner.shutdown()

    // Every node's process gone (places in a cluster end with the process: a new log object), then one
    // starts: it cannot know the log did not go back, so ids jump and a restart event follows what the
    // queue held.
    let again = try await join(InMemorySharedLog(log.stored))
    let afterRestart = try await again.events(queueID: queue, user: bob, lastEventID: seen.id + 1, dontBlock: true)
    #expect(afterRestart.map(\.body) == [.restart])
    #expect((afterRestart.first?.id ?? 0) > seen.id + 1 + (1 << 20) - 1, "no jump in ids: \(afterRestart)")
    await again.shutdown()
  }
}
