import EventProtocol
import Foundation
import Simulation

/// `swift run Demo [options]`: a simulated world of video messaging on flaky networks (see `--help`), or the
/// scripted sessions with `--scripted`.
@main
struct Demo {
  static func main() async throws {
    let options: DemoOptions
    do {
      options = try DemoOptions.parse(Array(CommandLine.arguments.dropFirst()))
    } catch {
      FileHandle.standardError.write(Data("Demo: \(error)\n".utf8))
      exit(2)
    }
    if options.help {
      print(DemoOptions.usage)
      return
    }
    if options.episodes {
      var demo = EpisodesDemo(seed: options.scenario.seed)
      let checks = demo.run()
      for line in demo.lines { print(line) }
      if !checks.allHold { exit(1) }
      return
    }
    if options.presence {
      var scenario = PresenceSimulation.Scenario()
      scenario.seed = options.scenario.seed
      scenario.hours = options.scenario.duration.inSeconds / 3600
      print(PresenceSimulation.run(scenario))
      return
    }
    if options.scripted {
      do {
        try await runScriptedSessions(seed: options.scenario.seed)
      } catch {
        FileHandle.standardError.write(Data("Demo: a scripted session stopped: \(error)\n".utf8))
        exit(1)
      }
      print("Done (seed \(options.scenario.seed); run again with the same seed for the same ids).")
      return
    }
    if options.answer {
      let ok = try await Task.detached { try AnswerDemo(options: options).run() }.value
      if !ok { exit(1) }
      return
    }
    let ok = try await Task.detached { try SimulationDemo(options: options).run() }.value
    if !ok { exit(1) }
  }

  /// `--scripted`: the server's contract, the engine and the video domain, each session run to its end.
  static func runScriptedSessions(
    seed: UInt64,
    output: @escaping ScriptedSessionOutput = { print($0) }
  ) async throws {
    try await ScriptedServerSession(seed: seed, output: output).run()
    try await ScriptedClientSession(seed: seed, output: output).run()
    try await ScriptedVideoSession(seed: seed, output: output).run()
  }
}
