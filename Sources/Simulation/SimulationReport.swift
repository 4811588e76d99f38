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
  /// Staleness: the time from a server change to the affected device showing it, for changes made while
  /// the device's app was open.
  public var foregroundStaleness: Percentiles
  /// Staleness for changes made while the device's app was closed.
  public var backgroundStaleness: Percentiles
  /// Seconds, per device-hour of open app, during which a sender with a working network looked at a
  /// status the server had already moved past (the seed's "status incorrect even when the user has turned
  /// on the app and has http connectivity").
  public var wrongStatusSecondsPerOpenHour: Double
  /// The longest stretch, in seconds, during which an open app showed a sender a status the server had
  /// already moved past.
  public var longestWrongStatusSeconds: Double
  /// Requests per device-hour.
  public var requestsPerDeviceHour: Double
  /// Bytes per device-hour: requests and answers (with 150 bytes of HTTP overhead each) and transfers.
  public var bytesPerDeviceHour: Double
  /// Pushes sent by the server.
  public var pushesSent: Int
  /// Pushes lost on the way.
  public var pushesLost: Int
  /// Pushes that named events the device already had, or came while a request would fetch them.
  public var pushesRedundant: Int
  /// Pushes whose events were applied with no request.
  public var pushesAppliedWithoutRequest: Int
  /// Registrations after the first of each device (expired queues, restarts without a dump).
  public var reregistrations: Int
  /// Share of open-app time in each freshness state (live, settling, connecting, cannot connect): what the
  /// user saw on the banner.
  public var freshnessShare: [String: Double]
  /// Videos sent (recordings saved on their device).
  public var videosSent: Int
  /// Videos in their recipient's library.
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
