import EventProtocol
import Foundation
import Simulation

/// The Demo's command line, parsed without any package: every option, its value, and one-line errors.
struct DemoOptions {
  var scenario = Scenario(seed: 2026)
  var strategies: [DeliveryStrategy] = [.pushPlusPoll]
  var seeds = 1
  var json = false
  var reportPath: String?
  var scripted = false
  /// `episodes` for the episode-queue scenario instead of the video simulation.
  var episodes = false
  /// `presence` for the cost of the video app's second, ephemeral machine.
  var presence = false
  /// `--answer`: sweep configurations over many seeds and state the cheapest that meets the target.
  var answer = false
  var seedsPerPoint = 200
  var target = ExperienceTarget()
  /// The push-loss rates the answer sweeps (`--push-loss` narrows it to one).
  var pushLosses = [0.05, 0.2, 0.5]
  var help = false

  static let usage = """
    Usage: swift run Demo [options]

    Runs a simulated world of users sending each other videos over flaky networks, on the real engine,
    server and wire format, deterministically; prints the moments that matter, a summary, and whether every
    device converged. The same seed gives the same run.

    Options:
      --seed N                  the run's seed (default 2026)
      --users N                 users (default 3)
      --devices N               devices per user (default 1)
      --hours H                 simulated hours of faults, then the world must settle (default 6)
      --strategy S              push-only | poll-only | push+poll | push+poll+payload | all (default push+poll)
      --platform P              ios | android | desktop: how the OS treats the app off screen (default ios)
      --poll-interval S         poll-only's poll interval while the app is open, in seconds (default 60)
      --faults LEVEL            none | moderate | heavy (default moderate)
      --push-loss P             share of pushes lost (default 0.2)
      --request-failure P       share of requests failing (default 0.02)
      --offline-per-hour R      offline periods per device-hour (default 0.5)
      --crashes-per-hour R      app kills per device-hour (default 0.2)
      --server-restarts-per-hour R   server restarts per hour (default 0.1); with --nodes, node kills
      --nodes N                 server nodes (default 1); more: a cluster of replicas of one shared log,
                                each request reaching a node drawn at random
      --partitions P            with --nodes: users in P partitions, each served by one node under a lease;
                                a killed node's partitions move at the others' next look (default: none)
      --blob-failure P          share of transfer steps failing (default 0.05)
      --seeds N                 run N seeds from --seed on, with a progress line, and summarize
      --answer                  answer the seed's question: sweep every strategy, poll-only's interval, request
                                deadlines and the push loss over many seeds (on every core), and state the
                                cheapest configuration that meets the target, with 95% intervals (default 2 h
                                per seed)
      --seeds-per-point N       seeds per configuration for --answer (default 200)
      --target-open S           --answer: while open, a wrong status corrected within S seconds at p99 (default 2)
      --target-after-open S     --answer: on opening, a wrong status corrected within S seconds at p99 (default 5)
      --target-closed S         --answer: closed, a change reaches the device within S seconds, median
                                (default 900)
      --trace                   print every step of the run
      --json                    print the report as JSON, for tools
      --report FILE.html        write a self-contained HTML page: timelines and the strategy comparison (with
                                --answer: the cost against wrong-status frontier, the chosen point marked)
      --scripted                run the scripted sessions instead (server contract, engine, video domain)
      --scenario NAME           videos (default: the simulation) | episodes (a podcast queue on a phone and a
                                tablet that spends a month offline) | presence (what the video app's second,
                                ephemeral machine costs per device-hour; uses --seed and --hours)
      --help                    show this help
    """

  /// Parses `arguments` (without the program name).
  /// - Throws: A one-line message naming the bad option or value.
  static func parse(_ arguments: [String]) throws(DemoOptionError) -> DemoOptions {
    var options = DemoOptions()
    var remaining = arguments[...]
    func value(_ option: String) throws(DemoOptionError) -> String {
      guard let value = remaining.popFirst() else { throw DemoOptionError("\(option) needs a value") }
      return value
    }
    func integer(_ option: String, in range: ClosedRange<Int>) throws(DemoOptionError) -> Int {
      let text = try value(option)
      guard let number = Int(text), range.contains(number) else {
        throw DemoOptionError(
          "\(option) takes a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'"
        )
      }
      return number
    }
    func rate(_ option: String, maximum: Double) throws(DemoOptionError) -> Double {
      let text = try value(option)
      guard let number = Double(text), number >= 0, number <= maximum else {
        throw DemoOptionError("\(option) takes a number from 0 to \(maximum), not '\(text)'")
      }
      return number
    }
    var given: Set<String> = []
    while let option = remaining.popFirst() {
      given.insert(option)
      switch option {
      case "--help", "-h": options.help = true
      case "--seed":
        let text = try value(option)
        guard let seed = UInt64(text) else { throw DemoOptionError("--seed takes a whole number, not '\(text)'") }
        options.scenario.seed = seed
      case "--users": options.scenario.users = try integer(option, in: 1...50)
      case "--nodes": options.scenario.nodes = try integer(option, in: 1...9)
      case "--partitions": options.scenario.partitions = try integer(option, in: 1...64)
      case "--devices": options.scenario.devicesPerUser = try integer(option, in: 1...5)
      case "--hours": options.scenario.duration = .seconds(try integer(option, in: 1...24 * 30) * 3600)
      case "--strategy":
        let text = try value(option)
        if text == "all" {
          options.strategies = DeliveryStrategy.allCases
        } else if let strategy = DeliveryStrategy(rawValue: text) {
          options.strategies = [strategy]
        } else {
          throw DemoOptionError(
            "--strategy takes push-only, poll-only, push+poll, push+poll+payload or all, not '\(text)'"
          )
        }
      case "--faults":
        switch try value(option) {
        case "none": options.scenario.faults = .none
        case "moderate": options.scenario.faults = FaultRates()
        case "heavy": options.scenario.faults = FaultRates().scaled(by: 3)
        case let other: throw DemoOptionError("--faults takes none, moderate or heavy, not '\(other)'")
        }
      case "--push-loss":
        options.scenario.faults.pushLoss = try rate(option, maximum: 1)
        options.pushLosses = [options.scenario.faults.pushLoss]
      case "--platform":
        switch try value(option) {
        case "ios": options.scenario.platform = .iOS
        case "android": options.scenario.platform = .android
        case "desktop": options.scenario.platform = .desktop
        case let other: throw DemoOptionError("--platform takes ios, android or desktop, not '\(other)'")
        }
      case "--poll-interval": options.scenario.foregroundPollSeconds = try integer(option, in: 1...3600)
      case "--answer": options.answer = true
      case "--seeds-per-point": options.seedsPerPoint = try integer(option, in: 2...100_000)
      case "--target-open": options.target.whileOpenP99 = try rate(option, maximum: 86_400)
      case "--target-after-open": options.target.afterOpeningP99 = try rate(option, maximum: 86_400)
      case "--target-closed": options.target.closedMedian = try rate(option, maximum: 86_400)
      case "--request-failure": options.scenario.faults.requestFailure = try rate(option, maximum: 0.9)
      case "--offline-per-hour": options.scenario.faults.offlinePerHour = try rate(option, maximum: 60)
      case "--crashes-per-hour": options.scenario.faults.crashesPerHour = try rate(option, maximum: 60)
      case "--server-restarts-per-hour": options.scenario.faults.serverRestartsPerHour = try rate(option, maximum: 60)
      case "--blob-failure": options.scenario.faults.blobFailure = try rate(option, maximum: 0.9)
      case "--seeds": options.seeds = try integer(option, in: 1...100_000)
      case "--trace": options.scenario.keepsFullTrace = true
      case "--json": options.json = true
      case "--report": options.reportPath = try value(option)
      case "--scripted": options.scripted = true
      case "--scenario":
        switch try value(option) {
        case "videos": (options.episodes, options.presence) = (false, false)
        case "episodes": (options.episodes, options.presence) = (true, false)
        case "presence": (options.episodes, options.presence) = (false, true)
        case let other: throw DemoOptionError("--scenario must be videos, episodes or presence, not '\(other)'")
        }
      default: throw DemoOptionError("unknown option '\(option)' (see --help)")
      }
    }
    if options.answer && !given.contains("--hours") { options.scenario.duration = .seconds(2 * 3600) }
    try options.checkConflicts(given: given)
    return options
  }

  /// Refuses options that would be ignored, and a report that could not be written, before anything runs.
  func checkConflicts(given: Set<String>) throws(DemoOptionError) {
    let simulationOnly = [
      "--strategy", "--seeds", "--json", "--report", "--users", "--devices", "--faults", "--answer", "--platform",
      "--poll-interval",
    ]
    if episodes || presence {
      let name = episodes ? "episodes" : "presence"
      if let ignored = simulationOnly.first(where: given.contains) {
        throw DemoOptionError("\(ignored) does not apply to --scenario \(name)")
      }
    }
    if scripted, let ignored = simulationOnly.first(where: given.contains) {
      throw DemoOptionError("\(ignored) does not apply to --scripted")
    }
    let answerOnly = ["--seeds-per-point", "--target-open", "--target-after-open", "--target-closed"]
    if answer {
      if episodes || presence || scripted { throw DemoOptionError("--answer runs the video simulation only") }
      if let ignored = ["--strategy", "--seeds", "--trace", "--poll-interval"].first(where: given.contains) {
        throw DemoOptionError("\(ignored) does not apply to --answer (it sweeps strategies and intervals itself)")
      }
    } else if let ignored = answerOnly.first(where: given.contains) {
      throw DemoOptionError("\(ignored) applies to --answer only")
    }
    if seeds > 1 && !answer {
      if json { throw DemoOptionError("--json prints one run's report; it does not combine with --seeds") }
      if reportPath != nil { throw DemoOptionError("--report draws one run; it does not combine with --seeds") }
    }
    if given.contains("--partitions"), scenario.nodes < 2 {
      throw DemoOptionError("--partitions needs --nodes 2 or more (one server serves every partition)")
    }
    if let reportPath {
      let folder = URL(fileURLWithPath: reportPath).deletingLastPathComponent()
      var isFolder: ObjCBool = false
      guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder), isFolder.boolValue else {
        throw DemoOptionError("--report: the folder \(folder.path) does not exist")
      }
    }
  }

  /// The command that replays this run.
  var replayCommand: String {
    var parts = ["swift run Demo --seed \(scenario.seed)"]
    if scenario.users != 3 { parts.append("--users \(scenario.users)") }
    if scenario.devicesPerUser != 1 { parts.append("--devices \(scenario.devicesPerUser)") }
    let hours = Int(scenario.duration.inSeconds / 3600)
    if hours != 6 { parts.append("--hours \(hours)") }
    if scenario.platform != .iOS { parts.append("--platform \(scenario.platform.name)") }
    if scenario.foregroundPollSeconds != 60 { parts.append("--poll-interval \(scenario.foregroundPollSeconds)") }
    if strategies.count > 1 {
      parts.append("--strategy all")
    } else if strategies != [.pushPlusPoll] {
      parts.append("--strategy \(strategies[0])")
    }
    if scenario.faults != FaultRates() { parts.append("(with the same fault options)") }
    return parts.joined(separator: " ")
  }
}

/// A bad option or value, as one line.
struct DemoOptionError: Error, Equatable, CustomStringConvertible {
  var description: String

  init(_ description: String) {
    self.description = description
  }
}
