import EventProtocol
import Foundation
import SampleApps
import Synchronization
import UpdateMachine

/// `soak-client --write-rate R --write-seconds S [--batch K] [--app checklist --teammate USER:KEY ...]`: one
/// device's acknowledged writes per second and their latency. The engine (a `FileStore`,
/// `URLSessionTransport`) submits writes at `R` a second for `S` seconds, those due at the same moment
/// together (`submit(contentsOf:)`, one save for them); each write's latency is from its submit to the
/// answer that acknowledged it. Prints the writes acknowledged per second over the run (first
/// submit to last acknowledgement), p50, p99 and the largest latency. `--batch 1` sends one write per round
/// trip (as before batches).
///
/// `--app notes` (the default) posts notes to the device's own user. `--app checklist` adds items to the
/// user's team checklist (`event-server --app checklist`): every write is delivered to the whole team. Each
/// `--teammate` is a member of the team joined and long-polling in this process for the whole run, so the
/// writes reach their queues as a team's do; at the end every teammate must hold the device's items.
final class WriteRateProbe: Sendable {
  /// The server, the user and key, and the state folder (`SoakClientMain`'s options).
  let client: Options
  let rate: Int
  let seconds: Int
  let batch: Int
  let app: SoakClientArguments.App
  /// The team members who listen while the device writes (checklist only).
  let teammates: [HTTPCredentials]

  init?(_ arguments: SoakClientArguments) {
    guard let rate = arguments.writeRate else { return nil }
    client = Options(arguments)
    self.rate = rate
    seconds = arguments.writeSeconds
    batch = arguments.batch
    app = arguments.app
    teammates = arguments.teammateCredentials
  }

  func run() async -> (String, Bool) {
    switch app {
    case .notes:
      let user = client.user
      return await measure(reducer: NotesReducer(user: user), join: nil) { .post("rate-\($0)", to: [user]) }
    case .checklist:
      var listeners: [UpdateMachine<ChecklistSnapshot, ChecklistChange, ChecklistCommand>] = []
      for teammate in teammates { listeners.append(await Self.listen(as: teammate, at: client.server)) }
      // This run's items, told apart from an earlier run's in the same team.
      let expected = "\(client.user.rawValue)-\(UUID().uuidString.prefix(8))-"
      var (line, succeeded) = await measure(reducer: ChecklistReducer(user: client.user), join: .join) {
        .add(title: "\(expected)\($0)")
      }
      // Every teammate heard every item the device added (they were delivered to the whole team).
      var heard: [Int] = []
      for listener in listeners {
        let deadline = ContinuousClock.now + .seconds(30)
        var count = 0
        while ContinuousClock.now < deadline {
          let state = await listener.snapshot.confirmedState
          count = state?.items.filter { $0.title.hasPrefix(expected) }.count ?? 0
          if count >= acknowledgedWrites.withLock({ $0 }) { break }
          try? await Task.sleep(for: .milliseconds(50))
        }
        heard.append(count)
        await listener.stop()
      }
      if !listeners.isEmpty {
        let all = acknowledgedWrites.withLock { $0 }
        let complete = heard.allSatisfy { $0 >= all }
        line += "; \(listeners.count) teammates heard \(heard.map(String.init).joined(separator: "/")) of \(all)"
        succeeded = succeeded && complete
      }
      return (line, succeeded)
    }
  }

  /// How many of the device's writes were acknowledged (set at the end of ``measure(reducer:join:command:)``).
  private let acknowledgedWrites = Mutex(0)

  /// A teammate: joins the team and long-polls until stopped.
  private static func listen(
    as credentials: HTTPCredentials,
    at server: URL
  ) async -> UpdateMachine<ChecklistSnapshot, ChecklistChange, ChecklistCommand> {
    let machine = UpdateMachine(
      reducer: ChecklistReducer(user: credentials.user),
      transport: URLSessionTransport<ChecklistSnapshot, ChecklistChange, ChecklistCommand>(
        baseURL: server,
        credentials: credentials
      ),
      store: InMemoryStore()
    )
    await machine.start()
    _ = await machine.submit(.join)
    _ = await machine.waitUntilLive()
    return machine
  }

  /// Offers the device's writes (`command(n)` for the n-th) after `join`, if any, and times them.
  private func measure<Reducer: UpdateReducer>(
    reducer: Reducer,
    join: Reducer.Mutation?,
    command: (Int) -> Reducer.Mutation
  ) async -> (String, Bool) {
    let transport = URLSessionTransport<Reducer.State, Reducer.Event, Reducer.Mutation>(
      baseURL: client.server,
      credentials: HTTPCredentials(user: client.user, apiKey: client.key)
    )
    let acknowledgedAt = Mutex<[MutationID: ContinuousClock.Instant]>([:])
    var configuration = UpdateMachineConfiguration()
    configuration.maximumMutationsPerRequest = batch
    try? FileManager.default.createDirectory(at: client.stateDirectory, withIntermediateDirectories: true)
    let machine = UpdateMachine(
      reducer: reducer,
      transport: transport,
      store: FileStore(url: client.stateDirectory.appendingPathComponent("write-rate.json")),
      configuration: configuration,
      log: { event in
        // Every write of a successful batch was decided: `--batch` is at most the server's window (32).
        guard case .requestSucceeded(_, .submit(let ids)) = event else { return }
        let now = ContinuousClock.now
        acknowledgedAt.withLock { for id in ids where $0[id] == nil { $0[id] = now } }
      }
    )
    await machine.start()
    _ = await machine.waitUntilLive()
    if let join {
      // The join is acknowledged before the run begins, and is not one of its writes.
      let id = await machine.submit(join)
      let deadline = ContinuousClock.now + .seconds(30)
      while acknowledgedAt.withLock({ $0[id] == nil }), ContinuousClock.now < deadline {
        try? await Task.sleep(for: .milliseconds(10))
      }
      acknowledgedAt.withLock { $0 = [:] }
    }
    let offered = rate * seconds
    // A device that cannot keep up stops being offered writes at twice the run's length.
    let cutoff = ContinuousClock.now + .seconds(2 * seconds)
    var total = offered
    var submittedAt: [MutationID: ContinuousClock.Instant] = [:]
    let started = ContinuousClock.now
    func due(_ number: Int) -> ContinuousClock.Instant {
      started + .nanoseconds(Int64(number) * 1_000_000_000 / Int64(rate))
    }
    var number = 0
    while number < offered {
      if ContinuousClock.now > cutoff {
        total = number
        break
      }
      if due(number) > ContinuousClock.now { try? await Task.sleep(until: due(number), clock: .continuous) }
      // Every write due by now goes in together, as an app writing faster than its store saves would: one
      // save holds them all (`submit(contentsOf:)`), instead of one fsync each.
      let submitted = ContinuousClock.now
      var group: [Reducer.Mutation] = []
      while number < offered, group.count < 256, due(number) <= submitted {
        group.append(command(number))
        number += 1
      }
      for id in await machine.submit(contentsOf: group) { submittedAt[id] = submitted }
    }
    let deadline = ContinuousClock.now + .seconds(30)
    while acknowledgedAt.withLock({ $0.count }) < total, ContinuousClock.now < deadline {
      try? await Task.sleep(for: .milliseconds(10))
    }
    await machine.stop()
    let acknowledged = acknowledgedAt.withLock { $0 }
    let latencies = submittedAt.compactMap { id, submitted in acknowledged[id].map { $0 - submitted } }.sorted()
    acknowledgedWrites.withLock { $0 = latencies.count }
    guard latencies.count == total, let last = acknowledged.values.max() else {
      return (
        "write-rate: batches of at most \(batch): \(latencies.count) of \(total) writes acknowledged within 30 s "
          + "(the device could not keep up with \(rate)/s)", false
      )
    }
    let keptUp = total == offered ? "" : " (could not keep up: offered \(total) of \(offered) in \(2 * seconds) s)"
    func milliseconds(_ duration: Duration) -> String {
      String(
        format: "%.1f ms",
        Double(duration.components.attoseconds) / 1e15 + Double(duration.components.seconds) * 1000
      )
    }
    let elapsed = last - started
    let perSecond = Double(total) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    return (
      "write-rate: \(total) writes offered at \(rate)/s\(keptUp), batches of at most \(batch): "
        + String(format: "%.0f", perSecond) + " acknowledged/s; latency p50 \(milliseconds(latencies[total / 2])), "
        + "p99 \(milliseconds(latencies[min(total - 1, total * 99 / 100)])), max \(milliseconds(latencies.last!))",
      true
    )
  }
}
