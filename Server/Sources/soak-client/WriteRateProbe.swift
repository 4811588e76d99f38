import EventProtocol
import Foundation
import SampleApps
import Synchronization
import UpdateMachine

/// `soak-client --write-rate R --write-seconds S [--batch K]`: one device's acknowledged writes per second
/// and their latency. The engine (a `FileStore`, `URLSessionTransport`) submits notes at `R` a second for
/// `S` seconds; each write's latency is from `submit` to the answer that acknowledged it. Prints the writes
/// acknowledged per second over the run (first submit to last acknowledgement), p50, p99 and the largest
/// latency. `--batch 1` sends one write per round trip (as before batches).
final class WriteRateProbe: Sendable {
  /// The server, the user and key, and the state folder (`SoakClientMain`'s options).
  let client: Options
  let rate: Int
  let seconds: Int
  let batch: Int

  init?(_ arguments: SoakClientArguments) {
    guard let rate = arguments.writeRate else { return nil }
    client = Options(arguments)
    self.rate = rate
    seconds = arguments.writeSeconds
    batch = arguments.batch
  }

  func run() async -> (String, Bool) {
    let transport = URLSessionTransport<NoteSnapshot, NoteEvent, NoteBoard.Command>(
      baseURL: client.server,
      credentials: HTTPCredentials(user: client.user, apiKey: client.key)
    )
    let acknowledgedAt = Mutex<[MutationID: ContinuousClock.Instant]>([:])
    var configuration = UpdateMachineConfiguration()
    configuration.maximumMutationsPerRequest = batch
    try? FileManager.default.createDirectory(at: client.stateDirectory, withIntermediateDirectories: true)
    let machine = UpdateMachine(
      reducer: NotesReducer(user: client.user),
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
    let offered = rate * seconds
    // A device that cannot keep up stops being offered writes at twice the run's length.
    let cutoff = ContinuousClock.now + .seconds(2 * seconds)
    var total = offered
    var submittedAt: [MutationID: ContinuousClock.Instant] = [:]
    let started = ContinuousClock.now
    for number in 0..<offered {
      if ContinuousClock.now > cutoff {
        total = number
        break
      }
      let due = started + .nanoseconds(Int64(number) * 1_000_000_000 / Int64(rate))
      if due > ContinuousClock.now { try? await Task.sleep(until: due, clock: .continuous) }
      let submitted = ContinuousClock.now
      let id = await machine.submit(.post("rate-\(number)", to: [client.user]))
      submittedAt[id] = submitted
    }
    let deadline = ContinuousClock.now + .seconds(30)
    while acknowledgedAt.withLock({ $0.count }) < total, ContinuousClock.now < deadline {
      try? await Task.sleep(for: .milliseconds(10))
    }
    await machine.stop()
    let acknowledged = acknowledgedAt.withLock { $0 }
    let latencies = submittedAt.compactMap { id, submitted in acknowledged[id].map { $0 - submitted } }.sorted()
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
