import EventProtocol

/// How devices learn about changes: the video seed's options (seed 000), made concrete.
public enum DeliveryStrategy: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
  /// No long-poll, no periodic poll: a device learns only from pushes (a bare hint, then one poll) and from
  /// opening the app (one poll).
  case pushOnly = "push-only"
  /// No pushes: a short poll every ``Scenario/foregroundPollSeconds`` while the app is open; in the
  /// background, a poll whenever the OS grants background time (every 15 minutes where it lets the app run).
  case pollOnly = "poll-only"
  /// Long-poll in the foreground; in the background, push hints (then one poll) and a poll whenever the OS
  /// grants background time (every 15 minutes where it lets the app run).
  case pushPlusPoll = "push+poll"
  /// As push+poll, and pushes carry the events when they fit 4 KiB, so most cost no request at all.
  case pushPlusPollPayload = "push+poll+payload"

  public var description: String { rawValue }

  /// Whether the server sends pushes to devices under this strategy.
  public var usesPushes: Bool { self != .pollOnly }
}

/// The faults a run throws at the world. Every rate is a probability per request, per push or per
/// transfer step, or a number per device-hour; all are 0 in ``none``.
public struct FaultRates: Sendable, Hashable, Codable {
  /// One-way network latency, drawn uniformly, in milliseconds.
  public var latencyMilliseconds: ClosedRange<Int> = 20...400
  /// Requests that fail with a connection error (before or after reaching the server).
  public var requestFailure = 0.02
  /// Requests that never answer (the engine's deadline ends them).
  public var neverAnswer = 0.005
  /// Requests answered 503.
  public var serverError = 0.01
  /// Offline periods per device-hour.
  public var offlinePerHour = 0.5
  /// How long an offline period lasts, in seconds.
  public var offlineSeconds: ClosedRange<Int> = 60...1800
  /// Pushes lost on the way.
  public var pushLoss = 0.2
  /// Pushes delivered twice.
  public var pushDuplicate = 0.05
  /// Pushes delivered late (up to 60 s, which also reorders them).
  public var pushLate = 0.2
  /// App kills per device-hour, at any moment.
  public var crashesPerHour = 0.2
  /// App kills per device-hour that strike at the next step the app takes (between two persistence steps,
  /// the worst moment).
  public var killsBetweenStepsPerHour = 1.0
  /// Server restarts per hour.
  public var serverRestartsPerHour = 0.1
  /// The share of server restarts that are crashes (SIGKILL: what is not yet durable is lost).
  public var restartIsCrash = 0.3
  /// Transfer steps that fail.
  public var blobFailure = 0.05
  /// Transfer steps that move fewer bytes than asked.
  public var blobTruncation = 0.02

  /// Moderate faults: what the demo runs by default.
  public init() {}

  /// No fault at all.
  public static var none: FaultRates {
    var rates = FaultRates()
    rates.latencyMilliseconds = 20...20
    rates.requestFailure = 0
    rates.neverAnswer = 0
    rates.serverError = 0
    rates.offlinePerHour = 0
    rates.pushLoss = 0
    rates.pushDuplicate = 0
    rates.pushLate = 0
    rates.crashesPerHour = 0
    rates.killsBetweenStepsPerHour = 0
    rates.serverRestartsPerHour = 0
    rates.blobFailure = 0
    rates.blobTruncation = 0
    return rates
  }

  /// Every rate multiplied by `factor` (latency kept).
  public func scaled(by factor: Double) -> FaultRates {
    var rates = self
    rates.requestFailure = min(requestFailure * factor, 0.9)
    rates.neverAnswer = min(neverAnswer * factor, 0.9)
    rates.serverError = min(serverError * factor, 0.9)
    rates.offlinePerHour *= factor
    rates.pushLoss = min(pushLoss * factor, 1)
    rates.pushDuplicate = min(pushDuplicate * factor, 1)
    rates.pushLate = min(pushLate * factor, 1)
    rates.crashesPerHour *= factor
    rates.killsBetweenStepsPerHour *= factor
    rates.serverRestartsPerHour *= factor
    rates.blobFailure = min(blobFailure * factor, 0.9)
    rates.blobTruncation = min(blobTruncation * factor, 0.9)
    return rates
  }
}

/// What users do.
public struct Behaviour: Sendable, Hashable, Codable {
  /// How often a user opens the app, per hour.
  public var opensPerHour = 3.0
  /// How long the app stays open, in seconds.
  public var openSeconds: ClosedRange<Int> = 60...600
  /// How often a user records a video while the app is open, per hour of open app.
  public var recordingsPerOpenHour = 6.0
  /// Video sizes, in kilobytes.
  public var videoKilobytes: ClosedRange<Int> = 200...3000
  /// How long after a video is shown the user watches it, in seconds (while the app is open).
  public var watchAfterSeconds: ClosedRange<Int> = 5...60
  /// Pages of a conversation's history the user looks at each time the app opens (the newest page first,
  /// then older ones); 0 (the default) for none. Fetched pages are partial state, kept live by events.
  public var historyPagesPerOpen = 0

  /// The default behaviour.
  public init() {}
}

/// One run of the simulation: who, for how long, how devices learn about changes, and what goes wrong.
///
/// ```swift
/// var scenario = Scenario(seed: 7)
/// scenario.strategy = .pushOnly
/// let report = Simulation.run(scenario)
/// ```
public struct Scenario: Sendable, Hashable, Codable {
  /// Drives every random choice: the same scenario gives the same run, byte for byte.
  public var seed: UInt64
  /// How many users.
  public var users = 3
  /// How many devices each user has.
  public var devicesPerUser = 1
  /// How long the faults last, in simulated time; then the world must settle.
  public var duration: Duration = .seconds(6 * 3600)
  /// How long the world may take to converge once the faults stop.
  public var settleLimit: Duration = .seconds(3600)
  /// How devices learn about changes.
  public var strategy: DeliveryStrategy = .pushPlusPoll
  /// What goes wrong.
  public var faults = FaultRates()
  /// How the phone's OS treats the app off screen (an iPhone by default).
  public var platform = PlatformProfile.iOS
  /// How often a poll-only app polls while open, in seconds.
  public var foregroundPollSeconds = 60
  /// The deadline of every request but the long-poll (register, short poll, write, fetch), in seconds;
  /// `nil` for the engine's defaults (30 s, and 60 s for a register). A request whose answer is lost keeps
  /// its user waiting until its deadline, so this sets the tail of the wrong-status figures.
  public var requestDeadlineSeconds: Int?
  /// What users do.
  public var behaviour = Behaviour()
  /// The queue lifespan devices ask for (short enough that long offline periods expire queues).
  public var queueLifespan: Duration = .seconds(3600)
  /// Whether to keep a full trace (every step), not only the moments that matter.
  public var keepsFullTrace = false
  /// Server nodes. One (the default): a durable server with its own log, restarted and crashed by the
  /// faults. More: a cluster of replicas of one shared log (the model of `EventServer.joining`), where each
  /// request goes to a node drawn at random (clients move between nodes) and the server faults kill one
  /// node at a time, which starts again from the log.
  public var nodes = 1
  /// With several nodes: the users' partitions (`nil`, the default: none). Each partition is served by one
  /// node under a lease (the model of `PartitionHost`): a request for a user reaches the node holding the
  /// user's partition (forwarded there by whichever node the balancer chose), or is refused with a `503`
  /// while the partition has no holder; a killed node's partitions are taken at the next look, and a node
  /// above its share lets partitions go, ending the polls parked on it for their users. Every node still
  /// applies every record: an in-memory application's state is one value.
  public var partitions: Int?

  /// A scenario with default settings and `seed`.
  public init(seed: UInt64) {
    self.seed = seed
  }
}
