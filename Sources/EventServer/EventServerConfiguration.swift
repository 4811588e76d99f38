/// The limits and timings of an ``EventServer``. The defaults follow Zulip's server.
public struct EventServerConfiguration: Sendable, Hashable {
  /// How long a queue lives without contact when its registration asked for no lifespan. Default 600 s.
  public var defaultIdleTimeout: Duration = .seconds(600)
  /// The longest lifespan a registration may ask for. Default 7 days.
  public var maximumIdleTimeout: Duration = .seconds(7 * 24 * 3600)
  /// The earliest a parked poll is ended with a heartbeat. Default 45 s.
  public var heartbeatMinimum: Duration = .seconds(45)
  /// The latest a parked poll is ended with a heartbeat. Default 55 s.
  public var heartbeatMaximum: Duration = .seconds(55)
  /// How often expired queues are swept away. Default 60 s.
  public var sweepInterval: Duration = .seconds(60)
  /// The most events a queue may hold; one more drops the queue (its client re-registers). Default 10,000.
  public var maximumEventsPerQueue: Int = 10_000
  /// The most queues one user may hold; one more evicts the least recently used. Default 32.
  public var maximumQueuesPerUser: Int = 32
  /// The client long-poll timeout a registration recommends. Default 90 s, above the heartbeat ceiling.
  public var recommendedLongPollTimeout: Duration = .seconds(90)

  /// The default configuration.
  public init() {}

  /// The idle timeout for a registration that asked for `lifespan`: the default for `nil` or zero, at
  /// most ``maximumIdleTimeout``.
  public func idleTimeout(forLifespan lifespan: Duration?) -> Duration {
    guard let lifespan, lifespan > .zero else { return defaultIdleTimeout }
    return min(lifespan, maximumIdleTimeout)
  }
}
