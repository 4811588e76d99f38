import EventProtocol
import Foundation
import SampleApps
import Testing
import UpdateMachineTesting

@testable import EventServer

/// A reminder service: a command schedules a note for later; the application has work of its own when a
/// reminder comes due, with no command to prompt it.
struct Reminders: ServerApplication, Equatable, Codable {
  enum Command: Codable, Sendable, Equatable {
    case remind(String, at: Timestamp, to: UserID)
  }

  struct Reminder: Codable, Sendable, Equatable {
    var text: String
    var at: Timestamp
    var to: UserID
  }

  var scheduled: [Reminder] = []
  var sent: [String] = []

  func snapshot(for user: UserID) -> NoteSnapshot { NoteSnapshot(notes: sent) }

  mutating func handle(_ command: Command, from user: UserID) throws(CommandRejection) -> [Delivery<NoteEvent>] {
    guard case .remind(let text, let at, let to) = command else { return [] }
    scheduled.append(Reminder(text: text, at: at, to: to))
    scheduled.sort { ($0.at, $0.text) < ($1.at, $1.text) }
    return []
  }

  var nextDeadline: Timestamp? { scheduled.first?.at }

  mutating func deadlineReached(at now: Timestamp) -> [Delivery<NoteEvent>] {
    let due = scheduled.prefix { $0.at <= now }
    scheduled.removeFirst(due.count)
    sent += due.map(\.text)
    return due.map { Delivery(to: [$0.to], event: .note(text: $0.text)) }
  }
}

@Suite("The application's own deadlines: the server runs them on its clock, durably")
struct ApplicationDeadlineTests {
  typealias ReminderMachine = EventServerStateMachine<Reminders>

  func makeReminderMachine() -> ReminderMachine {
    var machine = ReminderMachine(
      application: Reminders(),
      configuration: EventServerConfiguration(),
      random: SeededRandomNumberGenerator(seed: 3),
      now: t0
    )
    machine.startRecording()
    return machine
  }

  @Test("a reminder reaches a parked poll when its time comes, and not before")
  func deadlineWakesParkedPoll() throws {
    var machine = makeReminderMachine()
    let (registration, _) = machine.register(user: alice, eventTypes: nil, lifespan: nil, clientID: nil, now: t0)
    let due = t0.advanced(by: .seconds(5))
    _ = try machine.handle(.remind("stretch", at: due, to: alice), from: bob, now: t0)
    #expect(machine.nextDeadline == due)
    let parked = machine.poll(
      PollID(1),
      queueID: registration.queueID,
      user: alice,
      lastEventID: registration.lastEventID,
      dontBlock: false,
      now: t0
    )
    #expect(parked.isEmpty)
    #expect(machine.timerFired(now: due.advanced(by: .milliseconds(-1))).isEmpty)
    let actions = machine.timerFired(now: due)
    guard case .completePoll(PollID(1), .events(let envelopes))? = actions.first else {
      Issue.record("the parked poll was not answered: \(actions)")
      return
    }
    #expect(envelopes.compactMap { if case .payload(.note(let text)) = $0.body { text } else { nil } } == ["stretch"])
    #expect(machine.application.nextDeadline == nil)
    #expect(machine.nextDeadline > due)
  }

  @Test("a recovered server replays the deadline: same application state, same queues, same event ids")
  func deadlineReplays() throws {
    var machine = makeReminderMachine()
    _ = machine.register(user: alice, eventTypes: nil, lifespan: nil, clientID: nil, now: t0)
    _ = try machine.handle(.remind("a", at: t0.advanced(by: .seconds(2)), to: alice), from: bob, now: t0)
    _ = try machine.handle(.remind("b", at: t0.advanced(by: .seconds(9)), to: alice), from: bob, now: t0)
    _ = machine.timerFired(now: t0.advanced(by: .seconds(3)))
    let entries = machine.takeRecordedEntries()
    #expect(entries.contains { if case .applicationDeadlineReached = $0.input { true } else { false } })
    let records = try entries.enumerated().map { index, entry in
      StoredRecord(position: UInt64(index + 1), bytes: try ServerLogCodec.encode(entry))
    }
    let (rebuilt, _) = try ReminderMachine.rebuilding(
      from: StoredLog(snapshot: nil, records: records),
      application: Reminders(),
      configuration: machine.configuration,
      random: SeededRandomNumberGenerator(seed: 0),
      now: t0
    )
    #expect(rebuilt.application == machine.application)
    #expect(rebuilt.application.sent == ["a"])
    #expect(rebuilt.dump() == machine.dump())
    #expect(rebuilt.application.nextDeadline == t0.advanced(by: .seconds(9)))
  }

  @Test("the actor's own timer runs the deadline: a long-poll gets the reminder when the clock reaches it")
  func actorRunsDeadline() async throws {
    let clock = ManualClock()
    let server = EventServer(
      application: Reminders(),
      clock: clock,
      anchor: clock.now,
      random: SeededRandomNumberGenerator(seed: 4)
    )
    let queueID = try await server.register(user: alice).queueID
    let due = clock.now.advanced(by: .seconds(30))
    try await server.handle(.remind("stand up", at: due, to: alice), from: bob)
    let poll = Task { try await server.events(queueID: queueID, user: alice, lastEventID: -1) }
    await server.waitForParkedPolls(count: 1)
    clock.advance(to: due)
    #expect(try await poll.value == [EventEnvelope(id: 0, body: .payload(.note(text: "stand up")))])
    #expect(await server.updateBookkeeping { $0.sent } == ["stand up"])
  }
}
