import EventProtocol
import Foundation

/// What a run measured and whether it converged.
public struct SimulationReport: Sendable, Hashable, Codable {
  /// The scenario that was run.
  public var scenario: Scenario
  /// Whether every device converged to its user's server snapshot, with empty outboxes and every video
  /// delivered, within the settle limit.
  public var converged: Bool
  /// What kept the world from converging, when it did not.
  public var convergenceGaps: [String]
  /// How long the world took to settle once the faults stopped.
  public var settleTime: Duration?
  /// Invariants broken during the run (empty when all held).
  public var violations: [String]
  /// Simulated device-hours (devices × duration).
  public var deviceHours: Double
  /// Staleness: the time from a server change to the affected device holding it, for changes made while
  /// the device's app was open (whether or not the user was still looking when it arrived).
  public var foregroundStaleness: Percentiles
  /// Staleness for changes made while the device's app was closed: how long the device lacked them, seen
  /// or not (a closed app's user sees nothing; ``wrongStatusAfterOpening`` is what they see on opening).
  public var backgroundStaleness: Percentiles
  /// How long a wrong status stayed on screen when it began while the user looked (the server moved on
  /// while the app was open and showing the right one), until corrected or the app closed.
  public var wrongStatusWhileOpen: Percentiles
  /// How long a wrong status stayed on screen when it was there as the app opened, until corrected or the
  /// app closed.
  public var wrongStatusAfterOpening: Percentiles
  /// The samples behind the experience figures, for aggregating over seeds.
  public var samples: ExperienceSamples
  /// Seconds, per device-hour of open app, during which a sender with a working network looked at a
  /// status the server had already moved past (the seed's "status incorrect even when the user has turned
  /// on the app and has http connectivity").
  public var wrongStatusSecondsPerOpenHour: Double
  /// The longest stretch, in seconds, during which an open app showed a sender a status the server had
  /// already moved past.
  public var longestWrongStatusSeconds: Double
  /// The share of device time the app was on screen.
  public var openShare: Double
  /// Sync requests (register, poll, write, fetch) per device-hour, from the devices.
  public var requestsPerDeviceHour: Double
  /// Sync bytes per device-hour: requests and answers, with 150 bytes of HTTP overhead each. Video
  /// content is counted apart.
  public var bytesPerDeviceHour: Double
  /// Video bytes moved by transfers per device-hour: what users recorded and watched, whatever the
  /// strategy.
  public var contentBytesPerDeviceHour: Double
  /// Requests that reached the server, per device-hour (the server's side of the cost).
  public var serverRequestsPerDeviceHour: Double
  /// Seconds the server held long-polls open, per device-hour (a parked poll holds memory and a connection).
  public var parkedPollSecondsPerDeviceHour: Double
  /// Pushes the server sent, per device-hour (each is a request to APNs or FCM).
  public var pushesSentPerDeviceHour: Double
  /// Pushes sent by the server.
  public var pushesSent: Int
  /// Pushes lost on the way.
  public var pushesLost: Int
  /// Pushes that named events the device already had, or came while a request would fetch them.
  public var pushesRedundant: Int
  /// Pushes whose events were applied with no request.
  public var pushesAppliedWithoutRequest: Int
  /// Pushes the OS held because a background app was over its silent-push budget.
  public var pushesThrottled: Int
  /// Pushes the OS dropped because the user had force-quit the app.
  public var pushesDiscarded: Int
  /// Pushes that reached the app's engine (after the push service and the OS held, coalesced, dropped or
  /// duplicated them).
  public var pushesDelivered: Int
  /// Registrations after the first of each device (expired queues, restarts without a dump).
  public var reregistrations: Int
  /// Share of open-app time in each freshness state (live, settling, connecting, cannot connect): what the
  /// user saw on the banner.
  public var freshnessShare: [String: Double]
  /// Times users opened the app (the same under every strategy for a seed: the script's sessions, and
  /// reopenings after a kill).
  public var appOpens: Int
  /// Videos users recorded (for an app of yours: writes its users made).
  public var recordings: Int
  /// Times apps were killed (crashes and kills between two steps; not force-quits or OS terminations).
  public var appKills: Int
  /// Times the OS woke a closed app (a push, a refresh, a finished transfer).
  public var wakes: Int
  /// Videos sent (recordings saved on their device); for an app of yours (``Simulation/run(_:app:)``),
  /// writes saved on their device.
  public var videosSent: Int
  /// Videos in their recipient's library; for an app of yours, saved writes the server has applied.
  public var videosDelivered: Int
  /// Pages of conversation histories merged into devices' states (``Behaviour/historyPagesPerOpen``).
  public var historyPagesMerged: Int
  /// Per device, when its open app's freshness changed (seconds since the start, and the new state;
  /// "closed" while the app is closed): what the HTML report draws.
  public var freshnessTimelines: [[FreshnessChange]]
  /// The moments that matter, in order.
  public var timeline: [String]
  /// Every step, when the scenario asked for it.
  public var trace: [String]
}

/// The raw samples of a run's experience figures, in seconds.
public struct ExperienceSamples: Sendable, Hashable, Codable {
  /// Each wrong status that began while the user looked: how long it stayed on screen.
  public var wrongWhileOpen: [Double]
  /// Each wrong status shown as the app opened: how long it stayed on screen.
  public var wrongAfterOpening: [Double]
  /// Each change made while the app was closed: how long until the device held it.
  public var closedStaleness: [Double]

  /// Creates the samples.
  public init(wrongWhileOpen: [Double], wrongAfterOpening: [Double], closedStaleness: [Double]) {
    self.wrongWhileOpen = wrongWhileOpen
    self.wrongAfterOpening = wrongAfterOpening
    self.closedStaleness = closedStaleness
  }
}

/// A device's freshness as its user saw it changed at `seconds` after the start.
public struct FreshnessChange: Sendable, Hashable, Codable {
  /// Seconds since the start of the run.
  public var seconds: Double
  /// "live", "settling", "connecting", "cannot connect", or "closed".
  public var state: String

  /// Creates a FreshnessChange from its parts.
  public init(seconds: Double, state: String) {
    self.seconds = seconds
    self.state = state
  }
}

/// Percentiles of a set of durations, in seconds.
public struct Percentiles: Sendable, Hashable, Codable, CustomStringConvertible {
  /// How many samples.
  public var count: Int
  /// The median.
  public var p50: Double
  /// The 99th percentile.
  public var p99: Double
  /// The largest.
  public var max: Double

  /// The percentiles of `samples` (seconds); all zero when there are none.
  public init(_ samples: [Double]) {
    let sorted = samples.sorted()
    count = sorted.count
    func rank(_ fraction: Double) -> Double {
      guard !sorted.isEmpty else { return 0 }
      return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * fraction).rounded()))]
    }
    p50 = rank(0.5)
    p99 = rank(0.99)
    max = sorted.last ?? 0
  }

  public var description: String {
    count == 0 ? "—" : "\(Self.format(p50)) / \(Self.format(p99)) / \(Self.format(max))"
  }

  /// Seconds as a short human string: 0.4 s, 12 s, 15 min, 2.1 h.
  public static func format(_ seconds: Double) -> String {
    switch seconds {
    case ..<10: String(format: "%.1f s", seconds)
    case ..<120: String(format: "%.0f s", seconds)
    case ..<7200: String(format: "%.0f min", seconds / 60)
    default: String(format: "%.1f h", seconds / 3600)
    }
  }
}
