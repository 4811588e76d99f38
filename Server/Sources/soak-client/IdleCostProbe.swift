import EventProtocol
import Foundation
import SampleApps
import UpdateMachine

/// `soak-client --idle-seconds N`: what an idle client costs. A machine registers, then holds its long-poll
/// open on a queue nobody writes to for `N` seconds; the probe prints the processor time the whole process
/// used over that window, as a share of it.
///
/// An idle long-poll should cost next to nothing: the client waits on a socket. On Linux,
/// FoundationNetworking's `URLSession` spins instead while the first request on a fresh connection waits for
/// its answer (docs/embedding.md, "Processor time while a request waits"): a long-poll sent so would burn a
/// processor for the whole hold. The engine's long-polls reuse the connection of the request before them; this
/// probe holds that. It measured 0.0 %, and 84.9 % with every poll on a fresh session. It fails when the share
/// is above `--idle-cpu-limit`. The share is processor time over wall time: a busy machine can only lower it,
/// so the verdict does not depend on the machine's speed.
struct IdleCostProbe {
  /// The server, the user and key, and the state folder (`SoakClientMain`'s options).
  let client: Options
  let idle: Duration
  let limit: Double

  init?(_ arguments: SoakClientArguments) {
    guard let seconds = arguments.idleSeconds else { return nil }
    client = Options(arguments)
    idle = .seconds(seconds)
    limit = arguments.idleCPULimit
  }

  func run() async -> (String, Bool) {
    let machine = UpdateMachine(
      reducer: NotesReducer(user: client.user),
      transport: URLSessionTransport<NoteSnapshot, NoteEvent, NoteBoard.Command>(
        baseURL: client.server,
        credentials: HTTPCredentials(user: client.user, apiKey: client.key)
      ),
      store: FileStore(url: client.stateDirectory.appendingPathComponent("record.json"))
    )
    await machine.start()
    let registeredBy = ContinuousClock.now + .seconds(30)
    while await machine.snapshot.confirmedState == nil {
      guard ContinuousClock.now < registeredBy else {
        await machine.stop()
        return ("idle-cost: FAILED (no registration within 30 s)", false)
      }
      try? await Task.sleep(for: .milliseconds(50))
    }
    // The first poll goes out once the registration is applied; a moment later it is parked on the server.
    try? await Task.sleep(for: .milliseconds(500))
    let before = Self.processorTime()
    let started = ContinuousClock.now
    try? await Task.sleep(for: idle)
    let used = Self.processorTime() - before
    let wall = ContinuousClock.now - started
    let metrics = await machine.snapshot.metrics
    await machine.stop()
    let seconds = Double(wall / .milliseconds(1)) / 1000
    let share = used / seconds
    let passed = share <= limit
    let line =
      String(format: "idle-cost: %.2f s of processor time over %.1f s idle ", used, seconds)
      + String(format: "(%.1f %%, limit %.1f %%); ", share * 100, limit * 100)
      + "polls \(metrics.polls), failures \(metrics.failures) — \(passed ? "passed" : "FAILED")"
    return (line, passed)
  }

  /// User and system processor time of this process so far, in seconds.
  static func processorTime() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
  }
}
