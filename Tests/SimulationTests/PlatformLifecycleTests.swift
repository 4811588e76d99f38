import EventProtocol
import Simulation
import Testing

/// A scenario with no fault, `users` users who never open the app unless told, for `hours` hours.
private func quietScenario(seed: UInt64, strategy: DeliveryStrategy, hours: Int = 6) -> Scenario {
  var scenario = Scenario(seed: seed)
  scenario.faults = .none
  scenario.strategy = strategy
  scenario.duration = .seconds(hours * 3600)
  return scenario
}

/// The OS decides when a closed app runs: the simulation must follow it, or its figures for "the app is
/// not running" are the engine's wishes, not what a phone does.
@Suite("Simulation: how the OS treats a closed app")
struct PlatformLifecycleTests {
  @Test("a suspended app's own timers do not run: closed on iOS it polls only when the OS grants a refresh")
  func suspendedAppRunsNoTimer() {
    var scenario = quietScenario(seed: 3, strategy: .pollOnly)
    scenario.behaviour.opensPerHour = 0
    let phone = Simulation.run(scenario)
    scenario.platform = .desktop
    let desktop = Simulation.run(scenario)
    #expect(phone.converged && desktop.converged)
    // The engine asks for a poll every 15 minutes; an iPhone grants about one refresh every two hours.
    #expect(desktop.requestsPerDeviceHour >= 3.5, "desktop: \(desktop.requestsPerDeviceHour)")
    #expect(phone.requestsPerDeviceHour < 1.5, "iOS: \(phone.requestsPerDeviceHour)")
    #expect(phone.wakes > 0 && desktop.wakes == 0)
  }

  @Test("a force-quit app gets no push and no background time until its user opens it")
  func forceQuitGetsNothing() {
    var scenario = quietScenario(seed: 4, strategy: .pushOnly)
    scenario.behaviour.recordingsPerOpenHour = 20
    scenario.platform.forceQuitShare = 1
    let quitting = Simulation.run(scenario)
    #expect(quitting.converged)
    #expect(quitting.pushesDiscarded > 0)
    #expect(quitting.wakes == 0, "a force-quit app was woken \(quitting.wakes) times")
    scenario.platform.forceQuitShare = 0
    let staying = Simulation.run(scenario)
    #expect(staying.pushesDiscarded == 0 && staying.wakes > 0)
  }

  @Test("silent pushes over the OS's budget are held, the newest kept, and everything still converges")
  func throttledPushesAreHeld() {
    var scenario = quietScenario(seed: 5, strategy: .pushPlusPoll)
    scenario.behaviour.recordingsPerOpenHour = 30
    scenario.platform.silentPushesPerHour = 0.5
    let throttled = Simulation.run(scenario)
    #expect(throttled.converged, "\(throttled.violations) \(throttled.convergenceGaps)")
    #expect(throttled.pushesThrottled > 0)
    scenario.platform.silentPushesPerHour = nil
    let free = Simulation.run(scenario)
    #expect(free.pushesThrottled == 0)
    // Held pushes wake the app less often.
    #expect(throttled.wakes < free.wakes)
  }
}

extension PlatformLifecycleTests {
  @Test("the push service keeps only the newest push for a device it cannot reach")
  func pushServiceCoalescesWhileUnreachable() {
    var scenario = quietScenario(seed: 8, strategy: .pushPlusPoll)
    scenario.behaviour.recordingsPerOpenHour = 30
    scenario.faults.offlinePerHour = 3
    scenario.faults.offlineSeconds = 600...1800
    scenario.platform = .desktop
    let keepingAll = Simulation.run(scenario)
    scenario.platform.pushServiceKeepsNewestOnly = true
    let keepingNewest = Simulation.run(scenario)
    #expect(keepingAll.converged && keepingNewest.converged)
    // The same pushes are sent (the same writes, the same outages); fewer reach the engines.
    #expect(keepingNewest.pushesSent == keepingAll.pushesSent)
    #expect(keepingNewest.pushesDelivered < keepingAll.pushesDelivered)
  }
}

/// Every strategy run on one seed must meet the same users and the same network: cost differences are then
/// the strategies', not the workload's.
@Suite("Simulation: common random numbers")
struct CommonRandomNumbersTests {
  @Test("the same seed under every strategy records the same videos and opens the app as often", arguments: 1...4)
  func sameWorldForEveryStrategy(seed: Int) {
    var scenario = Scenario(seed: UInt64(seed))
    scenario.duration = .seconds(3 * 3600)
    let reports = Simulation.compareStrategies(scenario)
    #expect(reports.allSatisfy { $0.converged })
    let recordings = reports.map(\.recordings)
    // A recording falls in the three seconds a killed app takes to open again only by rare chance.
    #expect(recordings.max()! - recordings.min()! <= 1, "recordings per strategy: \(recordings)")
    #expect(recordings.min()! > 0)
    let opens = reports.map { $0.appOpens - $0.appKills }
    #expect(opens.max()! - opens.min()! <= 2, "opens per strategy: \(opens)")
  }
}
