import EventProtocol
import Foundation
import SampleApps
import Testing

@testable import EventServer

/// The durable form is exact: after any sequence of inputs, the state rebuilt from a snapshot plus the
/// recorded log (through the record codec) equals the live state, parked polls and all, once the
/// acknowledgements polls made since the last record are recorded (they are written lazily, before the next
/// input of any kind: a queue's overflow, which depends on what was acknowledged, replays the same).
@Suite("Replay equals the live state")
struct ReplayPropertyTests {
  @Test("snapshot plus log rebuilds the live state", arguments: 1...400)
  func replayEqualsLive(seed: UInt64) throws {
    var run = ReplayRun(seed: seed)
    for _ in 0..<160 { run.step() }
    run.machine.flushAcknowledgements(now: run.now)
    run.entries += run.machine.takeRecordedEntries()
    let rebuilt = try run.rebuild()
    let live = run.machine
    let context = "seed \(seed), trace:\n" + run.trace.suffix(40).joined(separator: "\n")
    #expect(rebuilt.application == live.application, "\(context)")
    #expect(rebuilt.dump() == live.dump(), "\(context)")
    #expect(rebuilt.nextSweepAt == live.nextSweepAt, "\(context)")
  }

  @Test("the runs are busy: every kind of input happens and decisions are recorded")
  func runsAreBusy() throws {
    var kinds: [String: Int] = [:]
    for seed in UInt64(1)...20 {
      var run = ReplayRun(seed: seed)
      for _ in 0..<160 { run.step() }
      for entry in run.entries {
        let kind = String(String(describing: entry.input).prefix { $0 != "(" })
        kinds[kind, default: 0] += 1
      }
    }
    for kind in [
      "registered", "mutationReceived", "commandHandled", "acknowledgements", "heartbeatsSent", "queuesRemoved",
      "swept",
      "pushTokenRegistered", "pushTokenInvalidated",
    ] {
      #expect(kinds[kind, default: 0] > 5, "\(kind): \(kinds[kind, default: 0])")
    }
  }
}

/// One random run of a recording machine with small limits, so evictions, overflows and expiry happen.
struct ReplayRun {
  var machine: Machine
  var random: SeededRandomNumberGenerator
  var now = t0
  var nextPollID: UInt64 = 0
  var entries: [ServerLogEntry<NoteBoard.Command>] = []
  var checkpoint: (snapshot: ServerSnapshot<NoteBoard>, count: Int)?
  var trace: [String] = []
  let users: [UserID] = ["alice", "bob", "carol"]

  init(seed: UInt64) {
    random = SeededRandomNumberGenerator(seed: seed)
    machine = makeMachine(
      {
        $0.maximumEventsPerQueue = 6
        $0.maximumQueuesPerUser = 2
      },
      seed: seed
    )
    machine.startRecording()
  }

  mutating func step() {
    let user = users.randomElement(using: &random)!
    let queues = machine.queues.keys.sorted()
    switch Int.random(in: 0..<100, using: &random) {
    case 0..<14:
      let types: Set<String>? = [nil, ["note"], ["ping", "restart"]].randomElement(using: &random)!
      let lifespan: Duration? = [nil, .seconds(60), .seconds(300)].randomElement(using: &random)!
      let client: ClientID? = [nil, "c1", "c2"].randomElement(using: &random)!
      trace.append("\(now) register \(user)")
      _ = machine.register(user: user, eventTypes: types, lifespan: lifespan, clientID: client, now: now)
    case 14..<40:
      guard let queueID = queues.randomElement(using: &random) else { return }
      let queue = machine.queue(queueID)!
      let owner = Bool.random(using: &random) ? queue.user : user
      let last = [
        -1, queue.lastEventID, queue.lastEventID - 1, queue.prunedThrough, Int.random(in: -2...20, using: &random),
      ]
      .randomElement(using: &random)!
      nextPollID += 1
      trace.append("\(now) poll \(queueID) by \(owner) through \(last)")
      _ = machine.poll(
        PollID(nextPollID),
        queueID: queueID,
        user: owner,
        lastEventID: last,
        dontBlock: Bool.random(using: &random),
        now: now
      )
    case 40..<46:
      let parked = machine.queues.values.compactMap(\.parkedPoll?.pollID).sorted()
      guard let pollID = parked.randomElement(using: &random) else { return }
      trace.append("\(now) cancel \(pollID)")
      _ = machine.pollCancelled(pollID, now: now)
    case 46..<62:
      let recipients = users.filter { _ in Bool.random(using: &random) }
      let command: NoteBoard.Command =
        Int.random(in: 0..<8, using: &random) == 0 ? .forbidden : .post("n\(entries.count)", to: recipients)
      trace.append("\(now) \(user) handles \(command)")
      _ = try? machine.handle(command, from: user, now: now)
    case 62..<78:
      let client: ClientID = ["c1", "c2"].randomElement(using: &random)!
      let mutationID = MutationID(rawValue: UInt64.random(in: 1...6, using: &random))
      let command: NoteBoard.Command =
        [.post("m", to: [user, "bob"]), .ping(to: ["carol"]), .forbidden].randomElement(using: &random)!
      trace.append("\(now) \(user)/\(client) mutation \(mutationID) \(command)")
      _ = try? machine.applyMutation(
        command,
        from: user,
        clientID: client,
        mutationID: mutationID,
        digest: MutationDigest(of: command),
        now: now
      )
    case 78..<82:
      guard let queueID = queues.randomElement(using: &random) else { return }
      trace.append("\(now) \(user) deletes \(queueID)")
      _ = try? machine.deleteQueue(queueID, user: user, now: now)
    case 82..<86:
      let token = PushToken(rawValue: ["p1", "p2"].randomElement(using: &random)!)
      if Bool.random(using: &random) {
        trace.append("\(now) push token \(token) for \(user)")
        _ = try? machine.registerPushToken(
          token,
          user: user,
          clientID: ["c1", "c2"].randomElement(using: &random)!,
          now: now
        )
      } else {
        trace.append("\(now) push token \(token) invalid")
        machine.pushTokenInvalid(token, now: now)
      }
    case 86..<97:
      now = now.advanced(by: .seconds(Int64.random(in: 1...120, using: &random)))
      trace.append("\(now) timer")
      _ = machine.timerFired(now: now)
    default:
      entries += machine.takeRecordedEntries()
      trace.append("\(now) snapshot at \(entries.count)")
      checkpoint = (machine.snapshot(position: UInt64(entries.count)), entries.count)
    }
    entries += machine.takeRecordedEntries()
  }

  /// The state rebuilt from the last checkpoint (if any) and the framed records, as a restart would.
  func rebuild() throws -> Machine {
    let records = try entries.enumerated().map { index, entry in
      StoredRecord(position: UInt64(index + 1), bytes: try ServerLogCodec.encode(entry))
    }
    let snapshot = try checkpoint.map {
      StoredSnapshot(position: $0.snapshot.position, bytes: try $0.snapshot.encoded())
    }
    let (rebuilt, report) = try Machine.rebuilding(
      from: StoredLog(snapshot: snapshot, records: records),
      application: NoteBoard(),
      configuration: machine.configuration,
      random: SeededRandomNumberGenerator(seed: 0),
      now: t0
    )
    #expect(report.lastPosition == UInt64(entries.count))
    #expect(report.replayed == entries.count - (checkpoint?.count ?? 0))
    return rebuilt
  }
}
