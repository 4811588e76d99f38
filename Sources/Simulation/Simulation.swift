import EventProtocol

/// Runs scenarios of the video app on flaky networks: deterministic, a seed replays byte for byte.
///
/// ```swift
/// var scenario = Scenario(seed: 42)
/// scenario.strategy = .pushOnly
/// let report = Simulation.run(scenario)
/// print(report.converged, report.foregroundStaleness)
/// ```
public enum Simulation {
  /// Runs one scenario to the end: faults for its duration, then settling.
  public static func run(_ scenario: Scenario) -> SimulationReport {
    var world = SimulationWorld(scenario: scenario)
    return world.run()
  }

  /// Runs the same scenario under every strategy, in ``DeliveryStrategy/allCases`` order.
  public static func compareStrategies(_ scenario: Scenario) -> [SimulationReport] {
    DeliveryStrategy.allCases.map { strategy in
      var variant = scenario
      variant.strategy = strategy
      return run(variant)
    }
  }
}
