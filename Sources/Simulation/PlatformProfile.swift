/// How the phone's operating system treats the app when its user is not looking at it: when it stops the
/// app, when it lets it run again, and what it does with silent pushes. docs/simulation.md gives each
/// figure's source; the ones no vendor publishes are marked there as assumptions.
///
/// ```swift
/// var scenario = Scenario(seed: 1)
/// scenario.platform = .android
/// scenario.platform.forceQuitShare = 0.2
/// ```
public struct PlatformProfile: Sendable, Hashable, Codable, CustomStringConvertible {
  /// A short name for reports: `ios`, `android`, `desktop`, or `custom`.
  public var name: String
  /// How long the app keeps running after it leaves the screen before the OS suspends it; `nil` for never
  /// (a desktop app).
  public var backgroundRunSeconds: Int?
  /// How long a wake for a silent push, a background refresh or a finished background transfer lets the app
  /// run before it is suspended again.
  public var wakeSeconds: Int
  /// Background refresh slots the OS grants a closed app per hour, on average (when the strategy asks for
  /// them; push-only does not). The OS chooses the moments.
  public var backgroundRefreshPerHour: Double
  /// The shortest time between two background refreshes.
  public var backgroundRefreshMinimumSeconds: Int
  /// Silent pushes the OS hands to a background app per hour before it throttles: a throttled push is held,
  /// only the newest one kept, until the budget allows or the user opens the app; `nil` for no throttle.
  public var silentPushesPerHour: Double?
  /// The share of the times a user leaves the app that are a force-quit: the OS then delivers no silent
  /// push and grants no background time until the user opens the app again.
  public var forceQuitShare: Double
  /// How often the OS terminates a suspended app to reclaim memory, per hour in the background. A
  /// terminated app (not force-quit) is launched again by a silent push or a refresh.
  public var terminationsPerBackgroundHour: Double
  /// Whether the push service keeps only the newest push for a device it cannot reach (APNs for every
  /// app; FCM for collapsible messages, which the server's sync hints are).
  public var pushServiceKeepsNewestOnly: Bool

  /// An iPhone: suspended 30 s after leaving the screen, woken for 30 s per silent push or refresh, a
  /// background refresh every two hours on average, three silent pushes an hour before throttling.
  public static var iOS: PlatformProfile {
    PlatformProfile(
      name: "ios",
      backgroundRunSeconds: 30,
      wakeSeconds: 30,
      backgroundRefreshPerHour: 0.5,
      backgroundRefreshMinimumSeconds: 15 * 60,
      silentPushesPerHour: 3,
      forceQuitShare: 0.1,
      terminationsPerBackgroundHour: 0.3,
      pushServiceKeepsNewestOnly: true
    )
  }

  /// An Android phone: background execution stops a minute after leaving the screen; high-priority data
  /// messages wake the app for 10 s without a throttle; periodic work about once an hour (Doze's
  /// maintenance windows); force-stop is rare.
  public static var android: PlatformProfile {
    PlatformProfile(
      name: "android",
      backgroundRunSeconds: 60,
      wakeSeconds: 10,
      backgroundRefreshPerHour: 1,
      backgroundRefreshMinimumSeconds: 15 * 60,
      silentPushesPerHour: nil,
      forceQuitShare: 0.02,
      terminationsPerBackgroundHour: 0.3,
      pushServiceKeepsNewestOnly: true
    )
  }

  /// A desktop app (or the engine with no OS in the way): never suspended, every push delivered, its own
  /// background timer runs. The model earlier versions of the simulation used.
  public static var desktop: PlatformProfile {
    PlatformProfile(
      name: "desktop",
      backgroundRunSeconds: nil,
      wakeSeconds: 0,
      backgroundRefreshPerHour: 0,
      backgroundRefreshMinimumSeconds: 0,
      silentPushesPerHour: nil,
      forceQuitShare: 0,
      terminationsPerBackgroundHour: 0,
      pushServiceKeepsNewestOnly: false
    )
  }

  /// Whether the OS ever suspends the app.
  public var suspends: Bool { backgroundRunSeconds != nil }

  public var description: String { name }

  /// Creates a profile from every figure.
  public init(
    name: String,
    backgroundRunSeconds: Int?,
    wakeSeconds: Int,
    backgroundRefreshPerHour: Double,
    backgroundRefreshMinimumSeconds: Int,
    silentPushesPerHour: Double?,
    forceQuitShare: Double,
    terminationsPerBackgroundHour: Double,
    pushServiceKeepsNewestOnly: Bool
  ) {
    self.name = name
    self.backgroundRunSeconds = backgroundRunSeconds
    self.wakeSeconds = wakeSeconds
    self.backgroundRefreshPerHour = backgroundRefreshPerHour
    self.backgroundRefreshMinimumSeconds = backgroundRefreshMinimumSeconds
    self.silentPushesPerHour = silentPushesPerHour
    self.forceQuitShare = forceQuitShare
    self.terminationsPerBackgroundHour = terminationsPerBackgroundHour
    self.pushServiceKeepsNewestOnly = pushServiceKeepsNewestOnly
  }
}
