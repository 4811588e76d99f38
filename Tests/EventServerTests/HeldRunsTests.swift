import EventProtocol
import SampleApps
import TestScheduling
import Testing

@testable import EventServer

/// A queue's runs of references against the obvious model (one id and entry per event), on random appends
/// (following the last run or not, joining or not) and acknowledgements; and the runs a fan-out leaves.
@Suite("HeldRuns: a queue's references as runs hold exactly the model's events, in as few runs as allowed")
struct HeldRunsTests {
  /// What the model holds of one event.
  private struct Held: Equatable {
    var id: Int
    var entry: Int
    /// Whether it may share a run with the event before it.
    var joins: Bool
  }

  @Test(
    "random appends and acknowledgements agree with a model of one reference per event",
    .cpuBound,
    arguments: 0..<200
  )
  func againstModel(seed: UInt64) {
    var random = SeededRandomNumberGenerator(seed: seed)
    var runs = HeldRuns()
    var model: [Held] = []
    var nextID = 0
    var nextEntry = 0
    var acknowledged = -1
    for step in 0..<400 {
      switch Int.random(in: 0..<10, using: &random) {
      case 0..<6:
        // Mostly the next id and entry (a broadcast), sometimes a gap in either (another queue's events
        // between, ids skipped), sometimes another author (no join).
        nextID += Int.random(in: 0..<4, using: &random) == 0 ? Int.random(in: 2...3, using: &random) : 1
        nextEntry += Int.random(in: 0..<4, using: &random) == 0 ? Int.random(in: 2...3, using: &random) : 1
        let joins = Int.random(in: 0..<5, using: &random) != 0
        runs.append(id: nextID, entry: nextEntry, joinsPrevious: joins)
        model.append(Held(id: nextID, entry: nextEntry, joins: joins))
      default:
        acknowledged = max(acknowledged, Int.random(in: (acknowledged - 2)...(nextID + 1), using: &random))
        var dropped: [HeldRun] = []
        runs.removeThrough(acknowledged) { dropped.append($0) }
        let expectedDropped = model.filter { $0.id <= acknowledged }
        model.removeAll { $0.id <= acknowledged }
        #expect(
          Self.flatten(dropped[...]) == expectedDropped.map { [$0.id, $0.entry] },
          "seed \(seed) step \(step): the runs handed back are the events acknowledged"
        )
      }
      #expect(Self.flatten(runs.live) == model.map { [$0.id, $0.entry] }, "seed \(seed) step \(step)")
      #expect(runs.count == model.count && runs.isEmpty == model.isEmpty, "seed \(seed) step \(step)")
      #expect(
        runs.live.count == Self.fewestRuns(model),
        "seed \(seed) step \(step): \(runs.live.count) runs, \(Self.fewestRuns(model)) needed"
      )
    }
  }

  @Test("events posted to everyone leave each queue one run (three after half are acknowledged), and answers are whole")
  func broadcastHoldsOneRun() throws {
    var machine = makeMachine { $0.maximumEventsPerQueue = 2_000 }
    let users = (0..<20).map { UserID("user\($0)") }
    let queues = users.map { machine.register(user: $0, eventTypes: nil, lifespan: nil, now: t0).0.queueID }
    for index in 0..<1_000 { _ = try machine.handle(.post("n\(index)", to: users), from: alice, now: t0) }
    for (user, queue) in zip(users, queues) {
      let slot = try #require(machine.table.store.slot(of: queue))
      #expect(machine.table.store.held(slot).count == 1, "\(user)'s queue holds its 1,000 events in one run")
      let events = machine.table.events(slot, limit: nil)
      #expect(events.map(\.id) == Array(0..<1_000))
    }
    #expect(machine.table.store.storedEventCount == 1_000, "each event stored once")
    #expect(machine.table.store.pendingByAuthor[alice] == 20_000, "every delivery counted against the author")
    // Half acknowledged everywhere frees entries 0..<500; the next 1,000 events take them lowest first,
    // then new ones: three runs a queue (500 old, 500 in the freed entries, 500 after), not one per event.
    for (index, (user, queue)) in zip(users, queues).enumerated() {
      _ = machine.poll(
        PollID(UInt64(index + 1)),
        queueID: queue,
        user: user,
        lastEventID: 499,
        dontBlock: true,
        now: t0
      )
    }
    for index in 0..<1_000 { _ = try machine.handle(.post("m\(index)", to: users), from: alice, now: t0) }
    for queue in queues {
      let slot = try #require(machine.table.store.slot(of: queue))
      #expect(machine.table.store.held(slot).count == 3)
      #expect(machine.table.events(slot, limit: nil).map(\.id) == Array(500..<2_000))
    }
    #expect(machine.table.store.pendingByAuthor[alice] == 30_000)
  }

  /// Each run's events as `[id, entry]` pairs, in order.
  private static func flatten(_ runs: ArraySlice<HeldRun>) -> [[Int]] {
    runs.flatMap { run in (0..<Int(run.count)).map { [run.id + $0, Int(run.entry) + $0] } }
  }

  /// How many runs the model's events need: a new run wherever an event does not follow the one
  /// before in both id and entry, or may not join it. (Acknowledging the middle of a run keeps its rest one
  /// run, so the live runs never need more.)
  private static func fewestRuns(_ model: [Held]) -> Int {
    var runs = 0
    for (index, held) in model.enumerated() {
      if index == 0 {
        runs += 1
        continue
      }
      let previous = model[index - 1]
      if !(held.joins && held.id == previous.id + 1 && held.entry == previous.entry + 1) { runs += 1 }
    }
    return runs
  }
}
