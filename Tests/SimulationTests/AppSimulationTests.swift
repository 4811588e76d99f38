import EventProtocol
import EventServer
import Foundation
import SampleApps
import Simulation
import TestScheduling
import Testing
import UpdateMachine

// APP-BEGIN
/// A note board in the simulated world: users post notes to themselves and a friend while the app is open.
struct NoteTaking: SimulatedApp {
  func makeApplication() -> NoteBoard { NoteBoard() }

  func makeReducer(for user: UserID) -> NotesReducer { NotesReducer(user: user) }

  func write(
    by user: UserID,
    friends: [UserID],
    using random: inout SeededRandomNumberGenerator
  ) -> NoteBoard.Command {
    let friend = friends.isEmpty ? user : friends[Int(random.next() % UInt64(friends.count))]
    return .post("note \(random.next() % 10_000) from \(user)", to: [user, friend])
  }

  /// A user notices a missing note, not a reordering.
  func showsWrong(_ shown: NoteSnapshot, server: NoteSnapshot) -> Bool {
    Set(shown.notes) != Set(server.notes)
  }
}

/// One run, and the cheapest configuration for a target, for the note board.
func simulateNoteTaking() -> (SimulationReport, SweepAnswer) {
  var scenario = Scenario(seed: 7)
  scenario.duration = .seconds(2 * 3600)
  scenario.behaviour.recordingsPerOpenHour = 20  // writes per open hour
  let report = Simulation.run(scenario, app: NoteTaking())

  let points = [
    SweepPoint(strategy: .pollOnly, foregroundPollSeconds: 15, pushLoss: 0),
    SweepPoint(strategy: .pushPlusPoll, requestDeadlineSeconds: 4, pushLoss: 0.2),
  ]
  let answer = Sweep.answer(base: scenario, points: points, seeds: 8, run: { Simulation.run($0, app: NoteTaking()) })
  return (report, answer)
}
// APP-END

/// The same note board with a reducer bug: a post's note is appended twice.
private struct DoublingNotesReducer: UpdateReducer {
  let base: NotesReducer
  var initialState: NoteSnapshot { base.initialState }
  func apply(_ event: NoteEvent, to state: inout NoteSnapshot) throws(ReducerError) {
    try base.apply(event, to: &state)
    try base.apply(event, to: &state)
  }
  func applyOptimistically(_ mutation: NoteBoard.Command, to state: inout NoteSnapshot) {
    base.applyOptimistically(mutation, to: &state)
  }
}

private struct BuggyNoteTaking: SimulatedApp {
  func makeApplication() -> NoteBoard { NoteBoard() }
  func makeReducer(for user: UserID) -> DoublingNotesReducer { DoublingNotesReducer(base: NotesReducer(user: user)) }
  func write(by user: UserID, friends: [UserID], using random: inout SeededRandomNumberGenerator) -> NoteBoard.Command {
    NoteTaking().write(by: user, friends: friends, using: &random)
  }
}

/// Simulating an application of your own: the world is generic over a server application, its reducer and
/// what users write; the video app is one domain of it.
@Suite("Simulation: your own app in the same world", .serialized)
struct AppSimulationTests {
  @Test("docs/simulation.md's example is this code: the note board converges, and the sweep answers for it")
  func documentedApp() throws {
    let (report, answer) = simulateNoteTaking()
    #expect(report.converged, "\(report.violations) \(report.convergenceGaps)")
    #expect(report.recordings > 10 && report.videosSent > 0 && report.videosDelivered == report.videosSent)
    #expect(answer.results.count == 3 && answer.results.allSatisfy { $0.failures == 0 })
    #expect(answer.results.allSatisfy { $0.serverCost.value > 0 })
    let code = try DocumentedCode.code(named: "APP", in: #filePath, indent: 0)
    #expect(try DocumentedCode.simulationPage(from: #filePath).contains(code))
    #expect(code.split(separator: "\n").count <= 50)
  }

  @Test(
    "40 seeds (100 in a full run) across strategies, platforms and fault mixes converge with every invariant held",
    .cpuBound,
    arguments: TestSeeds.first(40, of: 100)
  )
  func converges(seed: Int) {
    var scenario = Scenario(seed: UInt64(seed))
    scenario.users = 2 + seed % 3
    scenario.devicesPerUser = 1 + seed % 2
    scenario.duration = .seconds(3600)
    scenario.strategy = DeliveryStrategy.allCases[seed % 4]
    scenario.platform = [PlatformProfile.iOS, .android, .desktop][seed % 3]
    scenario.faults = seed % 5 == 0 ? FaultRates().scaled(by: 3) : FaultRates()
    scenario.behaviour.recordingsPerOpenHour = 20
    let report = Simulation.run(scenario, app: NoteTaking())
    #expect(report.converged, "seed \(seed): \(report.violations.prefix(2)) \(report.convergenceGaps.prefix(2))")
  }

  @Test("a reducer that applies an event twice is caught: a device holds a state the server never had")
  func catchesAReducerBug() {
    var scenario = Scenario(seed: 3)
    scenario.duration = .seconds(3600)
    scenario.behaviour.recordingsPerOpenHour = 20
    let report = Simulation.run(scenario, app: BuggyNoteTaking())
    #expect(!report.converged)
    #expect(report.violations.contains { $0.contains("a state the server never had") })
  }

  @Test("every strategy meets the same users: the same writes on one seed")
  func sameWritesForEveryStrategy() {
    var scenario = Scenario(seed: 11)
    scenario.duration = .seconds(2 * 3600)
    scenario.behaviour.recordingsPerOpenHour = 20
    let writes = DeliveryStrategy.allCases.map { strategy in
      var variant = scenario
      variant.strategy = strategy
      return Simulation.run(variant, app: NoteTaking()).recordings
    }
    #expect(writes.max()! - writes.min()! <= 1, "writes per strategy: \(writes)")
  }
}
