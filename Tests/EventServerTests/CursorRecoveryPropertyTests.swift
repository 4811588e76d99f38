import EventProtocol
import Foundation
import SampleApps
import Testing

@testable import EventServer

/// Polls write nothing, so a crash can lose acknowledgements the clients made: the server's cursor (what it
/// keeps of a queue) is then behind each client's finger (the last id it applied). The property: whatever
/// the acknowledgements, flushes and crashes, each client that skips events by id ends with exactly the
/// notes posted to it, in order, once each, and no queue is lost or refused.
@Suite("Cursor recovery: lost acknowledgements cost the server a few events held again, never a note")
struct CursorRecoveryPropertyTests {
  /// One client: its queue and its finger.
  struct Client {
    let user: UserID
    var queueID: QueueID
    var finger: Int
    var seen: [String] = []
  }

  @Test("random posts, polls, flushes and crashes: every client's notes equal what was posted to it", arguments: 0..<40)
  func clientsEqualTheTruth(seed: UInt64) throws {
    _ = try Self.run(seed: seed)
  }

  @Test("the seeds reach what the property is about: crashes that bring cursors back behind their fingers")
  func seedsReachCursorsBehind() throws {
    var crashes = 0
    var behind = 0
    for seed in UInt64(0)..<40 {
      let stats = try Self.run(seed: seed)
      crashes += stats.crashes
      behind += stats.behind
    }
    #expect(crashes >= 40)
    #expect(behind >= 20, "queues whose cursor came back behind their client's finger: \(behind)")
  }

  /// One random history; returns how many crashes it had, and how many times a queue came back from one with
  /// its cursor behind its client's finger (holding events the client had).
  static func run(seed: UInt64) throws -> (crashes: Int, behind: Int) {
    var random = SeededRandomNumberGenerator(seed: seed)
    let users: [UserID] = [alice, bob, carol]
    var now = t0
    var machine = makeMachine({ $0.acknowledgementFlushInterval = .seconds(2) }, seed: seed)
    machine.startRecording()
    var committed: [ServerLogEntry<NoteBoard.Command>] = []
    var clients = users.map { user in
      let registration = machine.register(user: user, eventTypes: nil, lifespan: .seconds(3_600), now: now).0
      return Client(user: user, queueID: registration.queueID, finger: registration.lastEventID)
    }
    var truth: [UserID: [String]] = [:]
    var trace: [String] = []
    var crashes = 0
    var behind = 0

    /// One dont_block poll: the client applies what is past its finger, skipping the rest by id.
    func poll(_ index: Int, _ machine: inout Machine, pollID: UInt64) throws {
      let actions = machine.poll(
        PollID(pollID),
        queueID: clients[index].queueID,
        user: clients[index].user,
        lastEventID: clients[index].finger,
        dontBlock: true,
        now: now
      )
      guard
        case .completePoll(_, .events(let events))? = actions.first(where: {
          if case .completePoll = $0 { true } else { false }
        })
      else {
        throw PropertyFailure(
          "seed \(seed): \(clients[index].user)'s poll was not answered with events: \(actions)\n\(trace.joined(separator: "\n"))"
        )
      }
      for event in events where event.id > clients[index].finger {
        clients[index].finger = event.id
        if case .payload(.note(let text)) = event.body { clients[index].seen.append(text) }
      }
    }

    var pollID: UInt64 = 0
    for step in 0..<120 {
      now = now.advanced(by: .milliseconds(Int64.random(in: 0...1_500, using: &random)))
      switch Int.random(in: 0..<10, using: &random) {
      case 0..<4:
        let recipients = users.filter { _ in Bool.random(using: &random) }
        let text = "n\(step)"
        _ = try machine.handle(.post(text, to: recipients), from: users.randomElement(using: &random)!, now: now)
        for recipient in recipients { truth[recipient, default: []].append(text) }
        trace.append("\(step): post \(text) to \(recipients)")
      case 4..<8:
        let index = Int.random(in: 0..<clients.count, using: &random)
        pollID += 1
        try poll(index, &machine, pollID: pollID)
        trace.append("\(step): \(clients[index].user) polls, finger \(clients[index].finger)")
      case 8:
        _ = machine.timerFired(now: now)
        trace.append("\(step): timer")
      default:
        // A crash: what was recorded is durable (the group commit wrote it before answering); what the polls
        // noted and did not record yet is lost.
        committed += machine.takeRecordedEntries()
        let records = try committed.enumerated().map { index, entry in
          StoredRecord(position: UInt64(index + 1), bytes: try ServerLogCodec.encode(entry))
        }
        var (restarted, _) = try Machine.rebuilding(
          from: StoredLog(snapshot: nil, records: records),
          application: NoteBoard(),
          configuration: machine.configuration,
          random: SeededRandomNumberGenerator(seed: random.next()),
          now: now
        )
        restarted.startRecording()
        _ = restarted.recover(now: now)
        // Queues whose cursor came back behind their client's finger: events the client has are held again.
        behind +=
          clients.filter { client in
            (restarted.queue(client.queueID)?.events.first?.id).map { $0 <= client.finger } ?? false
          }.count
        machine = restarted
        crashes += 1
        trace.append("\(step): crash")
      }
      committed += machine.takeRecordedEntries()
    }
    // Every client drains what is left.
    for index in clients.indices {
      for _ in 0..<3 {
        pollID += 1
        try poll(index, &machine, pollID: pollID)
      }
      #expect(
        clients[index].seen == truth[clients[index].user, default: []],
        "seed \(seed), \(crashes) crashes: \(clients[index].user)\n\(trace.joined(separator: "\n"))"
      )
    }
    return (crashes, behind)
  }
}

struct PropertyFailure: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
