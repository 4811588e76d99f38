import EventProtocol
import Foundation
import SampleApps
import Testing

@testable import EventServer

/// Polls write nothing: their acknowledgements are recorded lazily, as one entry, before the next input of
/// any kind, when the flush interval has passed, or at shutdown (`ReplayPropertyTests` holds the log exact
/// with them; these hold when they are written, and what a crash that loses them costs).
@Suite("Poll acknowledgements are recorded lazily")
struct LazyAcknowledgementTests {
  func at(_ seconds: Int64) -> Timestamp { t0.advanced(by: .seconds(seconds)) }

  /// A recording machine with bob's queue holding two notes, its records taken.
  func machineWithTwoNotes() throws -> (Machine, QueueID, [ServerLogEntry<NoteBoard.Command>]) {
    var machine = makeMachine { $0.acknowledgementFlushInterval = .seconds(2) }
    machine.startRecording()
    let queueID = machine.register(user: bob, eventTypes: nil, lifespan: .seconds(60), now: t0).0.queueID
    _ = try machine.handle(.post("one", to: [bob]), from: alice, now: t0)
    _ = try machine.handle(.post("two", to: [bob]), from: alice, now: t0)
    let entries = machine.takeRecordedEntries()
    return (machine, queueID, entries)
  }

  @Test("polls record nothing; the next input records their acknowledgements first, as one entry")
  func nextInputRecordsThemFirst() throws {
    var (machine, queueID, _) = try machineWithTwoNotes()
    let ids = machine.queue(queueID)!.events.map(\.id)
    _ = machine.poll(PollID(1), queueID: queueID, user: bob, lastEventID: ids[0], dontBlock: true, now: at(1))
    _ = machine.poll(PollID(2), queueID: queueID, user: bob, lastEventID: ids[1], dontBlock: true, now: at(3))
    #expect(machine.takeRecordedEntries().isEmpty)
    #expect(machine.queue(queueID)!.events.isEmpty, "pruned in memory at once")
    _ = try machine.handle(.post("three", to: [carol]), from: alice, now: at(4))
    let entries = machine.takeRecordedEntries().map { String(describing: $0.input) }
    #expect(
      entries == [
        String(
          describing: ServerInput<NoteBoard.Command>.acknowledgements([
            QueueAcknowledgement(queueID: queueID, lastEventID: ids[1], contact: at(3))
          ])
        ),
        String(
          describing: ServerInput<NoteBoard.Command>.commandHandled(user: alice, command: .post("three", to: [carol]))
        ),
      ]
    )
  }

  @Test("without other inputs, the timer records them once the flush interval has passed; shutdown records the rest")
  func timerAndShutdownRecordThem() throws {
    var (machine, queueID, _) = try machineWithTwoNotes()
    let last = machine.queue(queueID)!.lastEventID
    _ = machine.poll(PollID(1), queueID: queueID, user: bob, lastEventID: last, dontBlock: true, now: at(1))
    #expect(machine.acknowledgementsDueAt == at(3))
    #expect(machine.nextDeadline == at(3))
    _ = machine.timerFired(now: at(2))
    #expect(machine.takeRecordedEntries().isEmpty, "not yet due")
    _ = machine.timerFired(now: at(3))
    #expect(machine.takeRecordedEntries().count == 1)
    #expect(machine.acknowledgementsDueAt == nil)
    // A parked poll, then the shutdown: its contact is recorded with the connections dropped.
    _ = machine.poll(PollID(2), queueID: queueID, user: bob, lastEventID: last, dontBlock: false, now: at(5))
    _ = machine.connectionsDropped(now: at(6))
    let entries = machine.takeRecordedEntries()
    #expect(entries.count == 1)
    if case .acknowledgements(let acknowledgements) = entries.first?.input {
      #expect(acknowledgements == [QueueAcknowledgement(queueID: queueID, lastEventID: last, contact: at(6))])
    } else {
      Issue.record("expected the acknowledgements, got \(entries)")
    }
  }

  @Test("a server without a log notes nothing")
  func noLogNoNotes() throws {
    var machine = makeMachine()
    let queueID = machine.register(user: bob, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    _ = machine.poll(PollID(1), queueID: queueID, user: bob, lastEventID: -1, dontBlock: true, now: at(1))
    #expect(machine.acknowledgementsDueAt == nil)
  }

  @Test(
    "a crash that loses them redelivers events the client skips by id, and expires no queue for a contact not written"
  )
  func crashLosesThem() throws {
    var (machine, queueID, entries) = try machineWithTwoNotes()
    let ids = machine.queue(queueID)!.events.map(\.id)
    // The client read both notes at at(59) s, one second before its 60 s lifespan would have run out
    // from its last recorded contact (t0); the acknowledgement was never written.
    _ = machine.poll(PollID(1), queueID: queueID, user: bob, lastEventID: ids[1], dontBlock: true, now: at(59))
    entries += machine.takeRecordedEntries()
    #expect(entries.allSatisfy { if case .acknowledgements = $0.input { false } else { true } })
    let records = try entries.enumerated().map { index, entry in
      StoredRecord(position: UInt64(index + 1), bytes: try ServerLogCodec.encode(entry))
    }
    // The server comes back 10 minutes later.
    var (restarted, _) = try Machine.rebuilding(
      from: StoredLog(snapshot: nil, records: records),
      application: NoteBoard(),
      configuration: machine.configuration,
      random: SeededRandomNumberGenerator(seed: 3),
      now: at(600)
    )
    restarted.startRecording()
    _ = restarted.recover(now: at(600))
    _ = restarted.timerFired(now: at(601))
    let queue = try #require(restarted.queue(queueID), "the queue survived: idle time restarts at recovery")
    #expect(queue.events.map(\.id).prefix(2) == ids[...], "both notes come again")
    // The client polls with the last id it applied: no error, and only what it has not seen yet.
    let actions = restarted.poll(
      PollID(2),
      queueID: queueID,
      user: bob,
      lastEventID: ids[1],
      dontBlock: true,
      now: at(602)
    )
    guard case .completePoll(_, .events(let events)) = actions.first else {
      Issue.record("expected an answer, got \(actions)")
      return
    }
    #expect(events.allSatisfy { $0.id > ids[1] && $0.body == .restart }, "\(events)")
  }
}
