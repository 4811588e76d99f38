import Simulation
import Testing

@testable import Demo

@Suite("The Demo's command line")
struct DemoOptionsTests {
  @Test("options set the scenario; --strategy all runs every strategy")
  func options() throws {
    let options = try DemoOptions.parse([
      "--seed", "7", "--users", "4", "--devices", "2", "--hours", "3", "--strategy", "all", "--push-loss", "0.5",
      "--json", "--report", "out.html", "--trace",
    ])
    #expect(options.scenario.seed == 7)
    #expect(options.scenario.users == 4 && options.scenario.devicesPerUser == 2)
    #expect(options.scenario.duration == .seconds(3 * 3600))
    #expect(options.strategies == DeliveryStrategy.allCases)
    #expect(options.scenario.faults.pushLoss == 0.5)
    #expect(options.json && options.reportPath == "out.html" && options.scenario.keepsFullTrace)
    #expect(try DemoOptions.parse(["--seeds", "10"]).seeds == 10)
    #expect(try DemoOptions.parse(["--faults", "none"]).scenario.faults == .none)
    #expect(try DemoOptions.parse([]).replayCommand == "swift run Demo --seed 2026")
  }

  @Test(
    "a bad option or value is a one-line error naming it",
    arguments: [
      (["--bogus"], "unknown option '--bogus' (see --help)"),
      (["--users", "x"], "--users takes a whole number from 1 to 50, not 'x'"),
      (["--users"], "--users needs a value"),
      (
        ["--strategy", "carrier-pigeon"],
        "--strategy takes push-only, poll-only, push+poll, push+poll+payload or all, not 'carrier-pigeon'"
      ),
      (["--push-loss", "2"], "--push-loss takes a number from 0 to 1.0, not '2'"),
      (["--faults", "medium"], "--faults takes none, moderate or heavy, not 'medium'"),
    ]
  )
  func errors(arguments: [String], message: String) {
    #expect(throws: DemoOptionError.self) { _ = try DemoOptions.parse(arguments) }
    do {
      _ = try DemoOptions.parse(arguments)
    } catch {
      #expect(error.description == message)
    }
  }
}

@Suite("Demo: the episodes scenario")
struct EpisodesScenarioTests {
  @Test("--scenario episodes runs the month-offline tablet and every check it prints holds")
  func episodesScenario() throws {
    let options = try DemoOptions.parse(["--scenario", "episodes"])
    #expect(options.episodes)
    var demo = EpisodesDemo(seed: options.scenario.seed)
    let checks = demo.run()
    #expect(checks.results.count == 8)
    #expect(checks.allHold, "\(demo.lines.joined(separator: "\n"))")
    #expect(demo.lines.contains { $0.contains("0 downloads started") })
    #expect(throws: DemoOptionError.self) { try DemoOptions.parse(["--scenario", "podcasts"]) }
  }
}

@Suite("Demo: the presence scenario")
struct PresenceScenarioTests {
  @Test("--scenario presence selects the second machine's cost, with --seed and --hours")
  func presenceScenario() throws {
    let options = try DemoOptions.parse(["--scenario", "presence", "--seed", "3", "--hours", "2"])
    #expect(options.presence && !options.episodes)
    #expect(options.scenario.seed == 3 && options.scenario.duration == .seconds(7_200))
    #expect(DemoOptions.usage.contains("presence"))
    let back = try DemoOptions.parse(["--scenario", "presence", "--scenario", "videos"])
    #expect(!back.presence && !back.episodes)
  }
}

@Suite("Demo: options that would be ignored are refused")
struct DemoOptionConflictTests {
  @Test("a report into a missing folder, and options another mode ignores, are one-line errors before any run")
  func conflicts() {
    for arguments in [
      ["--report", "/no/such/folder/report.html"],
      ["--scenario", "episodes", "--strategy", "all"],
      ["--scenario", "presence", "--json"],
      ["--json", "--seeds", "5"],
      ["--report", "out.html", "--seeds", "5"],
      ["--scripted", "--users", "2"],
      ["--answer", "--strategy", "push-only"],
      ["--answer", "--seeds", "5"],
      ["--answer", "--poll-interval", "5"],
      ["--answer", "--scenario", "episodes"],
      ["--target-open", "1"],
      ["--seeds-per-point", "10"],
      ["--platform", "windows"],
      ["--poll-interval", "0"],
    ] {
      #expect(throws: DemoOptionError.self, "\(arguments)") { try DemoOptions.parse(arguments) }
    }
    #expect((try? DemoOptions.parse(["--report", "out.html", "--strategy", "all"])) != nil)
  }
}

@Suite("Demo: the answer's options")
struct DemoAnswerOptionTests {
  @Test("--answer takes its seeds, target and platform, and runs 2 h per seed unless --hours says otherwise")
  func answerOptions() throws {
    let options = try DemoOptions.parse([
      "--answer", "--seeds-per-point", "30", "--target-open", "1.5", "--target-after-open", "8",
      "--target-closed", "600", "--platform", "android", "--push-loss", "0.3",
    ])
    #expect(options.answer && options.seedsPerPoint == 30)
    #expect(options.target.whileOpenP99 == 1.5 && options.target.afterOpeningP99 == 8)
    #expect(options.target.closedMedian == 600)
    #expect(options.scenario.platform == .android && options.pushLosses == [0.3])
    #expect(options.scenario.duration == .seconds(2 * 3600))
    let longer = try DemoOptions.parse(["--answer", "--hours", "3"])
    #expect(longer.scenario.duration == .seconds(3 * 3600))
    let single = try DemoOptions.parse(["--platform", "desktop", "--poll-interval", "15", "--strategy", "poll-only"])
    #expect(single.scenario.platform == .desktop && single.scenario.foregroundPollSeconds == 15)
    #expect(single.replayCommand.contains("--platform desktop") && single.replayCommand.contains("--poll-interval 15"))
  }
}
