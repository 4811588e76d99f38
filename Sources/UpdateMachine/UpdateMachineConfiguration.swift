import EventProtocol

/// How an update machine registers, retries, polls in the background and reports freshness.
///
/// The defaults suit a phone app: queues that outlive a background poll interval (so a background poll, or
/// an app opened after hours away, uses its finger instead of downloading a snapshot), deadlines on every
/// request, and limits on what a server may ask the client to wait.
///
/// ```swift
/// var configuration = UpdateMachineConfiguration()
/// configuration.backgroundPollInterval = .seconds(30 * 60)
/// try configuration.validate()
/// ```
public struct UpdateMachineConfiguration: Hashable, Sendable {
  /// The event types to register for; `nil` for all.
  public var eventTypes: Set<String>? = nil
  /// The queue lifespan to ask for. Default 24 hours, as Zulip's mobile clients ask for queues of many
  /// hours: it must be longer than ``backgroundPollInterval``, or every background poll would find its
  /// queue gone. `nil` takes the server's default (600 s).
  public var queueLifespan: Duration? = .seconds(24 * 3600)
  /// Backoff for connection failures, 5xx and rate limits (100 ms doubling to 10 s).
  public var backoff: BackoffPolicy = .standard
  /// The slower backoff before re-registering after a malformed response, another 4xx or a reducer failure.
  public var protocolErrorBackoff: BackoffPolicy = .protocolErrors
  /// Backoff for the outbox's retries and for retrying a failed save.
  public var outboxBackoff: BackoffPolicy = .standard
  /// How often to poll in the background; `nil` for never.
  public var backgroundPollInterval: Duration? = .seconds(15 * 60)
  /// The long-poll timeout to use when the server recommends none (90 s).
  public var defaultLongPollTimeout: Duration = .seconds(90)
  /// The range a server's recommended long-poll timeout is clamped to (10 s to 10 minutes): a timeout of
  /// zero would fail every long-poll at once, a huge one would hide a dead connection.
  public var longPollTimeoutRange: ClosedRange<Duration> = .seconds(10) ... .seconds(600)
  /// The most events one poll asks for (1,000), so a device back from a long absence catches up in bounded
  /// batches (each applied, saved and acknowledged before the next); `nil` asks for everything at once.
  /// While polls come back full the limit grows, up to ``catchUpBatchLimit``.
  public var pollBatchLimit: Int? = 1_000
  /// The most events one poll asks for while catching up (16,000): each poll that comes back full asks for
  /// twice as many as the last, up to this, and the first poll that is not full goes back to
  /// ``pollBatchLimit``. A long backlog then costs fewer batches, each of which copies the state, publishes
  /// a snapshot and saves (Bench C1: twice the events per second in process), while the first batch
  /// after a wake stays small. Set it to ``pollBatchLimit`` for batches of one size. Ignored when
  /// ``pollBatchLimit`` is `nil`.
  public var catchUpBatchLimit: Int = 16_000
  /// The deadline of a register request (60 s: a snapshot can be large).
  public var registerTimeout: Duration = .seconds(60)
  /// The deadline of a non-blocking poll (30 s).
  public var shortPollTimeout: Duration = .seconds(30)
  /// The deadline of a mutation request (30 s).
  public var submitTimeout: Duration = .seconds(30)
  /// The most outbox writes sent in one request (32): the server applies them in order, each at most once,
  /// and answers an outcome per write. 1 sends one write per round trip. Keep it at most the server's
  /// memory of decisions per client (`EventServerConfiguration.mutationWindow`, 32 by default; a server
  /// decides no more of a batch than that, and the rest go in the next): a batch the server decided whose
  /// answer was lost in a crash is sent again, and its repeats must fall within that memory.
  public var maximumMutationsPerRequest = 32
  /// The longest `retry-after` a server may impose (5 minutes); longer ones are cut to it.
  public var maximumRetryAfter: Duration = .seconds(300)
  /// How long a disconnection is hidden from the UI (``Freshness/settling``) before it shows (300 ms).
  public var freshnessDebounce: Duration = .milliseconds(300)
  /// How many consecutive failures make the UI say ``Freshness/cannotConnect(since:reason:)`` (2).
  public var failuresBeforeCannotConnect: Int = 2
  /// While the platform says the network is gone (``UpdateMachine/networkLost()``), how often a failed
  /// request is tried again, in case the report was wrong (5 minutes); `nil` for never. Until then the
  /// machine waits for ``UpdateMachine/networkBecameAvailable()``, a push or the foreground, instead of
  /// retrying at its failure backoff into a network it was told is lost.
  public var offlineProbeInterval: Duration? = .seconds(300)
  /// The memory bound of a partial state (``PartialState``), set by the app: the engine applies it to the
  /// state whatever the server's snapshot said, and forgets the least recently used narrows whenever it is
  /// passed (after events as after pages), never one the app shows (``UpdateMachine/show(_:)``). `nil` keeps
  /// the partial state's own limits.
  public var partialLimits: PartialLimits? = nil

  /// The default configuration.
  public init() {}

  /// The lifetime of a queue registered with ``queueLifespan``, as the server applies it (600 s when none
  /// is asked, at most 7 days).
  public var assumedQueueLifetime: Duration {
    guard let queueLifespan, queueLifespan > .zero else { return .seconds(600) }
    return min(queueLifespan, .seconds(7 * 24 * 3600))
  }

  /// What is wrong with this configuration, if anything.
  public var problems: [String] {
    var problems: [String] = []
    if let interval = backgroundPollInterval, interval >= assumedQueueLifetime {
      problems.append(
        "backgroundPollInterval (\(interval)) must be shorter than the queue lifetime (\(assumedQueueLifetime)): "
          + "every background poll would find its queue expired and download a whole snapshot; "
          + "raise queueLifespan or poll more often"
      )
    }
    if let interval = backgroundPollInterval, interval <= .zero {
      problems.append("backgroundPollInterval must be positive, or nil for never")
    }
    for (name, value) in [
      ("registerTimeout", registerTimeout), ("shortPollTimeout", shortPollTimeout), ("submitTimeout", submitTimeout),
      ("defaultLongPollTimeout", defaultLongPollTimeout),
    ] where value <= .zero {
      problems.append("\(name) must be positive")
    }
    if longPollTimeoutRange.lowerBound <= .zero { problems.append("longPollTimeoutRange must start above zero") }
    if maximumRetryAfter < .zero { problems.append("maximumRetryAfter must not be negative") }
    if failuresBeforeCannotConnect < 1 { problems.append("failuresBeforeCannotConnect must be at least 1") }
    if let probe = offlineProbeInterval, probe <= .zero {
      problems.append("offlineProbeInterval must be positive, or nil for never")
    }
    if let limit = pollBatchLimit, limit < 1 { problems.append("pollBatchLimit must be at least 1, or nil for all") }
    if let limit = pollBatchLimit, catchUpBatchLimit < limit {
      problems.append("catchUpBatchLimit must be at least pollBatchLimit")
    }
    if let limits = partialLimits, limits.narrows < 1 || limits.items < 1 {
      problems.append("partialLimits must allow at least one narrow and one item")
    }
    return problems
  }

  /// Checks the configuration.
  /// - Throws: ``ConfigurationError`` listing every problem.
  public func validate() throws(ConfigurationError) {
    let problems = problems
    if !problems.isEmpty { throw ConfigurationError(problems: problems) }
  }
}

/// An ``UpdateMachineConfiguration`` that cannot work. A machine made with one traps with this message,
/// since it is a programming error; call ``UpdateMachineConfiguration/validate()`` to check one first.
public struct ConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
  /// Every problem found.
  public var problems: [String]

  /// Creates a ConfigurationError from its parts.
  public init(problems: [String]) {
    self.problems = problems
  }

  public var description: String { "invalid UpdateMachineConfiguration: " + problems.joined(separator: "; ") }
}

/// How much of a partial state a device holds at most (``UpdateMachineConfiguration/partialLimits``).
public struct PartialLimits: Sendable, Hashable {
  /// The most narrows (lists) held at once.
  public var narrows: Int
  /// The most known items held at once (the narrows shown keep theirs even past it).
  public var items: Int

  /// A bound of `narrows` lists and `items` items.
  public init(narrows: Int, items: Int) {
    self.narrows = narrows
    self.items = items
  }
}
