import Foundation

/// `swift run -c release Bench [W1|W2|W3|W4|C1|G1|N1|all] [--quick] [--repeats N] [--check]`: the performance
/// issue's workloads on today's code, printing `workload metric value unit` lines after a header naming the
/// machine, and with `--check` judging them against a thresholds file (``Threshold``).
@main
struct Bench {
  static let usage = """
    Usage: swift run -c release Bench [W1|W2|W3|W4|C1|G1|N1|all] [--quick] [--repeats N]
                                      [--check] [--thresholds FILE]

    Runs the performance workloads and prints `workload metric value unit (range)` lines. Each workload checks
    its own result and exits non-zero when it is wrong.
      W1   fan-out: 1,000 queues, 100,000 events to 10 queues each, drained every 1,000 events; then
           1,000 events each to all 1,000 queues, to a list the application keeps and to one built per event
      W2   idle queues: 100,000 registrations, bytes per queue, sweeps
      W3   catch-up: one queue of 100,000 events drained in one poll, in process and through JSON, after
           warm-up rounds (printed apart, with their page faults); then in polls of 1,000
      W4   wake latency: 1,000 parked long-polls woken one by one, beside the same hand-over on a bare actor
           (and on one kept busy as long as the server's median command); and the command's own round trip
           (the server's work for one wake)
      C1   client: an UpdateMachine draining 100,000 events (memory store, file store, through JSON), and
           the save after a one-event batch when the state holds 10,000 videos, and the whole record of
           the drained 100,000 statuses encoded (what each compaction writes)
      G1   growth: a backlog drained in polls of 1,000 and a sweep of expired queues at 10 k, 100 k and
           1 M, with the ratio between sizes (10 x is linear)
      N1   projection: 1 to 16 nodes on a log of 32 partitions, each node on its own machine, in the virtual-time
           model with the costs measured here (docs/scaling.md)
      --quick   small sizes and one repetition (what CI runs)
      --repeats N   rounds of each measured workload, whose median is printed (default 5). The first
                    rounds run on memory the process has not touched yet; more rounds show the steady state
      --check   after the run, judges each figure by its rule in Benchmarks/thresholds (a bound, or a multiple
                of a floor measured in the same run) and exits non-zero when one is exceeded or missing; says
                which targets are met. Release builds at full sizes only
      --thresholds FILE   the rules --check reads (default Benchmarks/thresholds in this directory)
    """

  static func main() async {
    var selected: Set<String> = []
    var quick = false
    var repeats: Int?
    var check = false
    var thresholdsPath = "Benchmarks/thresholds"
    var arguments = CommandLine.arguments.dropFirst()
    while let argument = arguments.popFirst() {
      switch argument {
      case "--help", "-h":
        print(usage)
        return
      case "--quick": quick = true
      case "--repeats":
        guard let text = arguments.popFirst(), let count = Int(text), (1...1_000).contains(count) else {
          refuse("--repeats needs a whole number from 1 to 1000")
        }
        repeats = count
      case "--check": check = true
      case "--thresholds":
        guard let path = arguments.popFirst() else { refuse("--thresholds needs a file") }
        thresholdsPath = path
        check = true
      case "W1", "W2", "W3", "W4", "C1", "G1", "N1": selected.insert(argument)
      case "all": selected = ["W1", "W2", "W3", "W4", "C1", "G1", "N1"]
      default:
        refuse("unknown argument '\(argument)' (see --help)")
      }
    }
    if selected.isEmpty { selected = ["W1", "W2", "W3", "W4", "C1", "G1", "N1"] }
    var rules: [Threshold] = []
    if check {
      if quick { refuse("--check judges full sizes: drop --quick") }
      if !isReleaseBuild { refuse("--check judges a release build's figures: swift run -c release Bench --check") }
      rules = readThresholds(at: thresholdsPath)
    }
    print("# Bench: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(quick ? "quick sizes" : "full sizes")")
    let figures = FigureLog()
    let workloads = Workloads(quick: quick, repeats: repeats ?? (quick ? 1 : 5), figures: figures)
    let ran = selected
    await Task.detached {
      if ran.contains("W1") { workloads.fanOut() }
      if ran.contains("W2") { workloads.idleQueues() }
      if ran.contains("W3") { workloads.catchUp() }
      if ran.contains("W4") { await workloads.wakeLatency() }
      if ran.contains("C1") {
        await workloads.clientDrain()
        workloads.clientSave()
      }
      if ran.contains("G1") { workloads.growth() }
      if ran.contains("N1") { workloads.partitionProjection() }
    }.value
    if check {
      let report = ThresholdReport(rules: rules, figures: figures.all, ran: ran)
      for line in report.lines { print(line) }
      if !report.passed { exit(1) }
    }
  }

  /// Whether this is an optimised build: a debug build's figures are not what the thresholds describe.
  static var isReleaseBuild: Bool {
    #if DEBUG
      false
    #else
      true
    #endif
  }

  static func refuse(_ message: String) -> Never {
    FileHandle.standardError.write(Data("Bench: \(message)\n".utf8))
    exit(2)
  }

  static func readThresholds(at path: String) -> [Threshold] {
    guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
      refuse("cannot read the thresholds file \(path)")
    }
    do {
      return try Threshold.parse(text)
    } catch {
      refuse("\(path): \(error)")
    }
  }
}
