import EventProtocol
import EventServer
import Foundation
import SampleApps
import UpdateMachineTesting

/// A short scripted session against the in-process server, on a manual clock so it is the same every run:
/// register, events arriving, a long-poll woken, a heartbeat, and an expired queue answered with
/// `BAD_EVENT_QUEUE_ID`. Each request and reply is printed in the JSON a Zulip client would see.
struct ScriptedServerSession {
  let clock = ManualClock()
  let server: EventServer<NoteBoard, ManualClock>
  let start: Timestamp
  let alice: UserID = "alice"
  let bob: UserID = "bob"
  let output: ScriptedSessionOutput

  init(seed: UInt64, output: @escaping ScriptedSessionOutput = { print($0) }) {
    self.output = output
    start = clock.now
    server = EventServer(
      application: NoteBoard(),
      clock: clock,
      anchor: start,
      random: SeededRandomNumberGenerator(seed: seed)
    )
  }

  func run() async throws {
    output("Scripted session against the in-process EventServer (manual clock, seeded ids)\n")

    say("alice registers for all event types")
    let registration = try await server.register(user: alice)
    show(try WireFormat.encode(registration))

    say("bob posts two notes to alice; they wait in her queue")
    try await server.handle(.post("Hi Alice!", to: [alice]), from: bob)
    try await server.handle(.post("Are you there?", to: [alice]), from: bob)

    say("alice polls with last_event_id=-1: she gets both at once")
    var reply = try await poll(registration.queueID, after: -1)
    show(try WireFormat.encode(reply))

    say("alice polls with last_event_id=1: nothing pending, so the poll parks")
    let parked = Task { try await poll(registration.queueID, after: 1) }
    await server.waitForParkedPolls(count: 1)
    clock.advance(by: .seconds(12))
    say("bob posts another note 12 s later: the long-poll wakes at once")
    try await server.handle(.post("Lunch?", to: [alice]), from: bob)
    reply = try await parked.value
    show(try WireFormat.encode(reply))

    say("alice polls with last_event_id=2 and nobody writes: the server ends the poll with a heartbeat")
    let heartbeat = Task { try await poll(registration.queueID, after: 2) }
    await server.waitForParkedPolls(count: 1)
    let deadline = await server.queue(registration.queueID)?.parkedPoll?.heartbeatAt ?? clock.now
    clock.advance(to: deadline)
    reply = try await heartbeat.value
    show(try WireFormat.encode(reply))

    say("alice acknowledges the heartbeat, then goes quiet for 11 minutes; the sweep expires her queue")
    _ = try await server.events(queueID: registration.queueID, user: alice, lastEventID: 3, dontBlock: true)
    let quietFrom = clock.now
    for minute in 1...11 {
      clock.advance(to: quietFrom.advanced(by: .seconds(60 * Int64(minute))))
      await server.waitForTimerFiring(atOrAfter: clock.now)
    }
    say("queues left on the server: \(await server.queueCount)")

    say("alice polls the expired queue")
    do {
      _ = try await poll(registration.queueID, after: 3)
      throw ScriptedSessionError(description: "the expired queue answered a poll")
    } catch let error as EventAPIError {
      show(try WireFormat.encode(error))
      say("the client matches code BAD_EVENT_QUEUE_ID and registers again:")
      let fresh = try await server.register(user: alice)
      show(try WireFormat.encode(fresh))
    }
    await server.shutdown()
  }

  private func poll(_ queueID: QueueID, after lastEventID: Int) async throws -> EventsReply<NoteEvent> {
    let events = try await server.events(queueID: queueID, user: alice, lastEventID: lastEventID)
    return EventsReply(events: events, queueID: queueID)
  }

  private func say(_ line: String) {
    let elapsed = start.duration(to: clock.now).components.seconds
    output("[t=\(String(format: "%4d", elapsed))s] \(line)")
  }

  private func show(_ json: Data) {
    output("           \(String(decoding: json, as: UTF8.self))\n")
  }
}
