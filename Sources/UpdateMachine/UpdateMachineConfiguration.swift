import EventProtocol

/// How an update machine registers, retries, polls in the background and reports freshness.
public struct UpdateMachineConfiguration: Hashable, Sendable {
  /// The event types to register for; `nil` for all.
  public var eventTypes: Set<String>? = nil
  /// The queue lifespan to ask for; `nil` for the server's default (600 s).
  public var queueLifespan: Duration? = nil
  /// Backoff for connection failures, 5xx and rate limits (100 ms doubling to 10 s).
  public var backoff: BackoffPolicy = .standard
  /// The slower backoff before re-registering after a malformed response, another 4xx or a reducer failure.
  public var protocolErrorBackoff: BackoffPolicy = .protocolErrors
  /// Backoff for the outbox's retries.
  public var outboxBackoff: BackoffPolicy = .standard
  /// How often to poll in the background; `nil` for never.
  public var backgroundPollInterval: Duration? = .seconds(15 * 60)
  /// The long-poll timeout to use when the server recommends none (90 s).
  public var defaultLongPollTimeout: Duration = .seconds(90)
  /// How long a disconnection is hidden from the UI (``Freshness/settling``) before it shows (300 ms).
  public var freshnessDebounce: Duration = .milliseconds(300)
  /// How many consecutive failures make the UI say ``Freshness/cannotConnect(since:reason:)`` (2).
  public var failuresBeforeCannotConnect: Int = 2

  /// The default configuration.
  public init() {}

  /// The lifetime of a queue registered with ``queueLifespan``, as the server applies it.
  public var assumedQueueLifetime: Duration {
    guard let queueLifespan, queueLifespan > .zero else { return .seconds(600) }
    return min(queueLifespan, .seconds(7 * 24 * 3600))
  }
}
