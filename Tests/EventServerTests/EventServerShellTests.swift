import EventProtocol
import Foundation
import SampleApps
import Testing
import UpdateMachineTesting

@testable import EventServer

private func makeServer(seed: UInt64 = 1) -> (EventServer<NoteBoard, ManualClock>, ManualClock) {
  let clock = ManualClock()
  let server = EventServer(
    application: NoteBoard(),
    clock: clock,
    anchor: clock.now,
    random: SeededRandomNumberGenerator(seed: seed)
  )
  return (server, clock)
}

/// Registers alice and parks a poll on her new queue; returns the queue and the waiting poll.
private func parkAlicesPoll(
  on server: EventServer<NoteBoard, ManualClock>
) async throws -> (QueueID, Task<[EventEnvelope<NoteEvent>], any Error>) {
  let queueID = try await server.register(user: alice).queueID
  let poll = Task { try await server.events(queueID: queueID, user: alice, lastEventID: -1) }
  await server.waitForParkedPolls(count: 1)
  return (queueID, poll)
}

@Suite("EventServer actor shell on a manual clock")
struct EventServerShellTests {
  @Test("a parked poll is woken by an event and gets the whole queue")
  func parkedPollWokenByEvent() async throws {
    let (server, _) = makeServer()
    let (_, events) = try await parkAlicesPoll(on: server)
    try await server.handle(.post("hello", to: [alice]), from: bob)
    #expect(try await events.value == [EventEnvelope(id: 0, body: .payload(.note(text: "hello")))])
    #expect(await server.parkedPollCount == 0)
  }

  @Test("a heartbeat ends a parked poll between 45 and 55 seconds", arguments: [1, 2, 3] as [UInt64])
  func heartbeat(seed: UInt64) async throws {
    let (server, clock) = makeServer(seed: seed)
    let start = clock.now
    let (queueID, events) = try await parkAlicesPoll(on: server)
    let deadline = try #require(await server.queue(queueID)?.parkedPoll?.heartbeatAt)
    #expect(start.duration(to: deadline) >= .seconds(45) && start.duration(to: deadline) <= .seconds(55))

    clock.advance(to: start.advanced(by: .seconds(44)))
    #expect(await server.parkedPollCount == 1)
    clock.advance(to: deadline)
    #expect(try await events.value == [EventEnvelope(id: 0, body: .heartbeat)])
  }

  @Test("an answered poll moves the next deadline later without a new timer task; the later deadline still fires")
  func timerKeptWhenDeadlineMovesLater() async throws {
    let (server, clock) = makeServer()
    let start = clock.now
    let (alicesQueue, alicesPoll) = try await parkAlicesPoll(on: server)
    let alicesHeartbeat = try #require(await server.queue(alicesQueue)?.parkedPoll?.heartbeatAt)
    clock.advance(to: start.advanced(by: .seconds(20)))
    let bobsQueue = try await server.register(user: bob).queueID
    let bobsPoll = Task { try await server.events(queueID: bobsQueue, user: bob, lastEventID: -1) }
    await server.waitForParkedPolls(count: 2)
    let bobsHeartbeat = try #require(await server.queue(bobsQueue)?.parkedPoll?.heartbeatAt)
    #expect(alicesHeartbeat < bobsHeartbeat)
    let timersBefore = await server.timerTasksStarted

    // Answering Alice's poll moves the earliest deadline from her heartbeat to a later one.
    try await server.handle(.post("hello", to: [alice]), from: bob)
    #expect(try await alicesPoll.value.count == 1)
    #expect(await server.timerTasksStarted == timersBefore)

    // The timer set for Alice's heartbeat fires with nothing due and sets itself again; Bob's comes on time.
    clock.advance(to: alicesHeartbeat)
    clock.advance(to: start.advanced(by: .seconds(60)))
    await server.waitForTimerFiring(atOrAfter: start.advanced(by: .seconds(60)))
    #expect(await server.parkedPollCount == 1)
    clock.advance(to: bobsHeartbeat)
    #expect(try await bobsPoll.value == [EventEnvelope(id: 0, body: .heartbeat)])
  }

  @Test("a second poll on the queue completes the first")
  func secondPollCompletesFirst() async throws {
    let (server, _) = makeServer()
    let (queueID, first) = try await parkAlicesPoll(on: server)
    async let second = server.events(queueID: queueID, user: alice, lastEventID: -1)
    #expect(try await first.value == [])
    await server.waitForParkedPolls(count: 1)
    try await server.handle(.post("later", to: [alice]), from: bob)
    #expect(try await second == [EventEnvelope(id: 0, body: .payload(.note(text: "later")))])
  }

  @Test("a cancelled poll throws CancellationError and leaves every event queued")
  func cancellation() async throws {
    let (server, _) = makeServer()
    let (queueID, poll) = try await parkAlicesPoll(on: server)
    poll.cancel()
    await #expect(throws: CancellationError.self) { try await poll.value }
    #expect(await server.parkedPollCount == 0)
    try await server.handle(.post("kept", to: [alice]), from: bob)
    let events = try await server.events(queueID: queueID, user: alice, lastEventID: -1, dontBlock: true)
    #expect(events == [EventEnvelope(id: 0, body: .payload(.note(text: "kept")))])
  }

  @Test("the sweep on the clock removes an expired queue and tells the application")
  func expirySweep() async throws {
    let (server, clock) = makeServer()
    let start = clock.now
    let registration = try await server.register(user: alice, lifespan: .seconds(90))
    clock.advance(to: start.advanced(by: .seconds(60)))
    await server.waitForTimerFiring(atOrAfter: start.advanced(by: .seconds(60)))
    #expect(await server.queueCount == 1)
    clock.advance(to: start.advanced(by: .seconds(120)))
    await server.waitForTimerFiring(atOrAfter: start.advanced(by: .seconds(120)))
    #expect(await server.queueCount == 0)
    #expect(await server.application.usersWhoseLastQueueWentAway == [alice])
    await #expect(throws: EventAPIError.badEventQueueID(registration.queueID)) {
      try await server.events(queueID: registration.queueID, user: alice, lastEventID: -1)
    }
  }

  @Test("deleting a queue fails its parked poll with BAD_EVENT_QUEUE_ID")
  func deleteQueue() async throws {
    let (server, _) = makeServer()
    let (queueID, poll) = try await parkAlicesPoll(on: server)
    try await server.deleteQueue(queueID, user: alice)
    await #expect(throws: EventAPIError.badEventQueueID(queueID)) { try await poll.value }
  }

  @Test("a corrupt or newer snapshot in the log is a typed error, and the log is left as it was")
  func badSnapshots() async throws {
    let corrupt = StoredLog(
      snapshot: StoredSnapshot(position: 3, bytes: Data(#"{"version": 1, "queues": [{"id": 3}]"#.utf8)),
      records: []
    )
    let log = InMemoryServerLog(corrupt)
    do {
      _ = try await EventServer.recovering(from: log, application: NoteBoard(), clock: ManualClock())
      Issue.record("a corrupt snapshot loaded")
    } catch {
      #expect(error.isSameKind(as: .undecodable("")))
    }
    #expect(log.stored == corrupt)

    let newer = StoredLog(snapshot: StoredSnapshot(position: 3, bytes: Data(#"{"version": 7}"#.utf8)), records: [])
    await #expect(throws: ServerLogError.newerFormat(found: 7, supported: 1)) {
      _ = try await EventServer.recovering(
        from: InMemoryServerLog(newer),
        application: NoteBoard(),
        clock: ManualClock()
      )
    }
  }

  @Test("shutdown ends parked polls with CancellationError and keeps their events")
  func shutdown() async throws {
    let (server, _) = makeServer()
    let (queueID, poll) = try await parkAlicesPoll(on: server)
    await server.shutdown()
    await #expect(throws: CancellationError.self) { try await poll.value }
    let after = try await server.events(queueID: queueID, user: alice, lastEventID: -1)
    #expect(after == [])
  }
}
