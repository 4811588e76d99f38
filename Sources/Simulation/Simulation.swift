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
    var world = SimulationWorld<VideoDomain>(scenario: scenario, domain: VideoDomain.makeWorldState(scenario: scenario))
    return world.run()
  }

  /// Runs one scenario of your own application: `app` says what its users write; the world does the rest
  /// (users opening and leaving the app, the network, pushes, the phone's OS, kills, a durable server that
  /// restarts and crashes), checks that no device ever holds a state the server never had and that every
  /// device converges, and measures staleness, wrong state on screen and cost, as for the video app.
  /// ``Behaviour/recordingsPerOpenHour`` is how often a user writes while the app is open.
  public static func run(_ scenario: Scenario, app: some SimulatedApp) -> SimulationReport {
    runApp(scenario, app: app)
  }

  private static func runApp<App: SimulatedApp>(_ scenario: Scenario, app: App) -> SimulationReport {
    var world = SimulationWorld<AppDomain<App>>(scenario: scenario, domain: app)
    return world.run()
  }

  /// Runs the same scenario under every strategy, in `DeliveryStrategy/allCases` order.
  public static func compareStrategies(_ scenario: Scenario) -> [SimulationReport] {
    DeliveryStrategy.allCases.map { strategy in
      var variant = scenario
      variant.strategy = strategy
      return run(variant)
    }
  }
}
