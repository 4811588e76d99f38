import EventProtocol
import EventServer
import Foundation
import SampleApps
import UpdateMachine
import UpdateMachineTesting

/// A scripted session of the client engine against the in-process server on a manual clock: registering,
/// events arriving, a dropped network with backoff, a write sent while offline, an expired queue, a push in
/// the background, and a restart from the persisted file. Every line is the same on every run.
struct ScriptedClientSession {
  typealias Machine = UpdateMachine<NoteSnapshot, NoteEvent, NoteBoard.Command>

  let clock = ManualClock()
  let server: EventServer<NoteBoard, ManualClock>
  let transport: FaultInjectingTransport<InProcessTransport<NoteBoard, ManualClock>, ManualClock>
  let store = InMemoryStore()
  let start: Timestamp
  let seed: UInt64
  let output: ScriptedSessionOutput

  init(seed: UInt64, output: @escaping ScriptedSessionOutput = { print($0) }) {
    self.seed = seed
    self.output = output
    start = clock.now
    server = EventServer(
      application: NoteBoard(),
      clock: clock,
      anchor: start,
      random: SeededRandomNumberGenerator(seed: seed)
    )
    transport = FaultInjectingTransport(
      InProcessTransport(server: server, user: "alice", throughWire: true),
      plan: FaultPlan(seed: seed),
      clock: clock
    )
  }

  func makeMachine() -> Machine {
    var configuration = UpdateMachineConfiguration()
    configuration.backgroundPollInterval = nil
    configuration.queueLifespan = .seconds(600)
    return UpdateMachine(
      reducer: NotesReducer(user: "alice"),
      transport: transport,
      store: store,
      clock: clock,
      anchor: start,
      configuration: configuration,
      random: SeededRandomNumberGenerator(seed: seed &+ 1)
    )
  }

  func run() async throws {
    output("\nScripted session of alice's UpdateMachine (manual clock, seeded jitter)\n")
    var machine = makeMachine()
    await machine.start()
    show(try await waitFor(machine, "registered and long-polling", isLive))

    try await post("Hi Alice!")
    show(try await waitFor(machine, "bob's note arrives through the long-poll") { $0.state?.notes.count == 1 })

    say("the network drops: the next three requests fail")
    transport.failNext(.connectionFailed("no route to host"), .connectionFailed("no route to host"), .timedOut)
    try await post("Are you there?")
    for attempt in 1...3 {
      let failed = try await waitFor(machine, "poll failed (attempt \(attempt))") { snapshot in
        if case .pollFailed(_, attempt, _) = snapshot.phase { true } else { false }
      }
      show(failed)
      if case .pollFailed(_, _, let retryAt) = failed.phase {
        say(
          "backoff: waiting \(milliseconds(clock.now.duration(to: retryAt))) ms (full jitter, bound \(100 << (attempt - 1)) ms)"
        )
        clock.advance(to: retryAt)
      }
    }
    show(
      try await waitFor(machine, "recovered: a dontBlock poll catches up at once") {
        isLive($0) && $0.state?.notes.count == 2
      }
    )

    say("alice writes while the server answers 503")
    transport.failNext(.serverError(status: 503))
    _ = await machine.submit(.post("On my way", to: ["alice", "bob"]))
    let pending = try await waitFor(machine, "the write waits in the outbox, shown optimistically") {
      $0.metrics.failures == 4
    }
    show(pending)
    clock.advance(by: .milliseconds(100))  // the outbox's first backoff is at most 100 ms
    show(
      try await waitFor(machine, "acknowledged, then confirmed by its own event") {
        $0.pendingMutations.isEmpty && isLive($0)
      }
    )

    say("alice puts the app away for 11 minutes; the server expires her queue")
    await machine.enteredBackground()
    let awayFrom = clock.now
    for minute in 1...11 {
      clock.advance(to: awayFrom.advanced(by: .seconds(60 * Int64(minute))))
      await server.waitForTimerFiring(atOrAfter: clock.now)
    }
    try await post("Lunch at noon?")
    say("a push arrives in the background: the engine knows its queue must have expired and re-registers")
    await machine.pushReceived()
    show(
      try await waitFor(machine, "re-registered in the background (no doomed poll)") {
        $0.metrics.registers == 2 && $0.state?.notes.count == 4
      }
    )
    await machine.enteredForeground()
    show(try await waitFor(machine, "back in the foreground", isLive))

    say("the app is killed and started again from its persisted file")
    await machine.stop()
    machine = makeMachine()
    await machine.start()
    try await post("Welcome back")
    let resumed = try await waitFor(machine, "resumed with the stored finger: no new registration") {
      isLive($0) && $0.state?.notes.count == 5
    }
    show(resumed)
    say("metrics of the restarted machine: \(describe(resumed.metrics))")
    say("server's notes for alice: \(await server.application.notes["alice"] ?? [])")
    await machine.stop()
    await server.shutdown()
  }

  private func post(_ text: String) async throws {
    say("bob posts \"\(text)\"")
    try await server.handle(.post(text, to: ["alice"]), from: "bob")
  }

  private func waitFor(
    _ machine: Machine,
    _ label: String,
    _ condition: @Sendable (Machine.Snapshot) -> Bool
  ) async throws -> Machine.Snapshot {
    for await snapshot in await machine.snapshots() where condition(snapshot) {
      say(label)
      return snapshot
    }
    throw ScriptedSessionError(description: "the machine stopped before: \(label)")
  }

  private func show(_ snapshot: Machine.Snapshot) {
    let notes = snapshot.state?.notes ?? []
    let pending = snapshot.pendingMutations.isEmpty ? "" : ", sending: \(snapshot.pendingMutations.count)"
    output(
      "           phase \(snapshot.phase.kind), freshness \(describe(snapshot.freshness.freshness)), notes \(notes)\(pending)"
    )
  }

  private func describe(_ freshness: Freshness) -> String {
    switch freshness {
    case .live: "live"
    case .settling: "settling"
    case .connecting(let since): "connecting since t=\(String(format: "%.3f", elapsed(since)))s"
    case .cannotConnect(let since, let reason):
      "can't connect since t=\(String(format: "%.3f", elapsed(since)))s (\(reason))"
    }
  }

  private func describe(_ metrics: UpdateMetrics) -> String {
    "registers \(metrics.registers), polls \(metrics.polls), events \(metrics.eventsApplied), submits \(metrics.submits), failures \(metrics.failures)"
  }

  private func say(_ line: String) {
    output("[t=\(String(format: "%7.3f", elapsed(clock.now)))s] \(line)")
  }

  private func elapsed(_ time: Timestamp) -> Double {
    start.duration(to: time).inSeconds
  }

  private func milliseconds(_ duration: Duration) -> Int {
    Int(duration.inSeconds * 1000)
  }
}

private func isLive(_ snapshot: ScriptedClientSession.Machine.Snapshot) -> Bool {
  if case .polling = snapshot.phase { return snapshot.freshness.freshness == .live }
  return false
}

extension Phase {
  /// The phase's name without its data.
  fileprivate var kind: String {
    switch self {
    case .stale: "stale"
    case .registering: "registering"
    case .registerFailed: "registerFailed"
    case .polling: "polling"
    case .pollFailed(_, let attempt, _): "pollFailed#\(attempt)"
    case .idle: "idle"
    case .stopped: "stopped"
    }
  }
}
