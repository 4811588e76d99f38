import EventProtocol

/// What the UI should say about how current the data is: a pure function of the machine's phase, its
/// timestamps and `now`.
public enum Freshness: Hashable, Sendable, CustomStringConvertible {
  /// Connected: a long-poll is established on a valid finger, so changes arrive within the events system's
  /// latency.
  case live
  /// Not connected, for less than the debounce (300 ms by default): keep showing what was shown, so a blip
  /// does not flicker a banner. Never reported while the data is known to be current.
  case settling
  /// Not connected since `since`, and working on it.
  case connecting(since: Timestamp)
  /// Requests have failed repeatedly since `since`; the data may be stale.
  case cannotConnect(since: Timestamp, reason: String)

  public var description: String {
    switch self {
    case .live: "live"
    case .settling: "settling"
    case .connecting(let since): "connecting(since \(since))"
    case .cannotConnect(let since, let reason): "cannotConnect(since \(since): \(reason))"
    }
  }
}

/// Freshness plus the time the data was last known to be current.
public struct FreshnessReport: Hashable, Sendable {
  /// The freshness.
  public var freshness: Freshness
  /// When the data was last known to equal the server's: `now` while live, else the last successful
  /// register or poll; `nil` if there was none yet.
  public var dataAsOf: Timestamp?

  /// Creates a FreshnessReport from its parts.
  public init(freshness: Freshness, dataAsOf: Timestamp?) {
    self.freshness = freshness
    self.dataAsOf = dataAsOf
  }
}
