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
  /// How long a poll's acknowledgement may wait before it is written to the input log, when no other input
  /// is written meanwhile (any other input writes the waiting acknowledgements first). Polls themselves write
  /// nothing; a crash loses at most this much acknowledgement, which only redelivers events clients skip by
  /// id. Zero writes each poll's acknowledgement at once. Default 2 s.
  public var acknowledgementFlushInterval: Duration = .seconds(2)
  /// The most events a queue may hold; one more drops the queue (its client re-registers). Default 10,000.
  ///
  /// What a queue's owner leaves unread counts against that owner alone: whoever wrote the events, a writer
  /// is never refused because a reader did not read (``EventServerStateMachine/pendingEvents(authoredBy:)``
  /// shows an operator who is writing to queues nobody reads).
  public var maximumEventsPerQueue: Int = 10_000
  /// The most queues one user may hold; one more evicts the least recently used. Default 32.
  public var maximumQueuesPerUser: Int = 32
  /// The client long-poll timeout a registration recommends. Default 90 s, above the heartbeat ceiling.
  public var recommendedLongPollTimeout: Duration = .seconds(90)

  /// How many mutation decisions are remembered per client, to recognise repeats. Default 32. A batch is
  /// decided no further than this many mutations, and a client's outbox sends its next batch only once the
  /// answers to the last are saved, so a retry after a crash repeats at most this many decided mutations;
  /// only a late duplicate of a request can reach further back.
  public var mutationWindow: Int = 32
  /// The most clients whose mutations are remembered per user; one more forgets the least recently seen.
  /// Default 64.
  public var maximumClientsPerUser: Int = 64
  /// How long a silent client's mutation memory is kept. Default 90 days: longer than a device plausibly
  /// stays offline holding a write whose acknowledgement was lost. A client silent for longer that then
  /// retries such a write gets it applied a second time; nothing is ever lost.
  public var mutationMemoryLifetime: Duration = .seconds(90 * 24 * 3600)
  /// The largest event, in bytes of JSON inside its envelope, an application should produce; `nil` for no
  /// limit. Default 256 KiB. Events are kept under it by refusing large commands before they are applied
  /// (``maximumCommandBytes``, with an application's events no larger than the command that caused them plus
  /// a little). An event over it all the same is still queued (no queue is dropped for what another user
  /// sent) and counted in ``EventServerStateMachine/oversizeEvents``.
  public var maximumEventBytes: Int? = 256 << 10
  /// The largest command, in bytes of JSON, a mutation may carry; `nil` for no limit. Default 64 KiB. A
  /// larger one is refused (`BAD_REQUEST`) before it is applied, so nothing changes.
  public var maximumCommandBytes: Int? = 64 << 10

  /// The shortest time between two pushes to one installation; pushes in between are coalesced into one
  /// sent at the end of the interval, composed then. Default 10 s.
  public var pushInterval: Duration = .seconds(10)
  /// The largest push payload, in bytes of JSON; events that do not fit are left out (the hint remains).
  /// Default 4 KiB, like the platforms' push payloads.
  public var maximumPushPayloadBytes: Int = 4096

  /// The default configuration.
  public init() {}

  /// The idle timeout for a registration that asked for `lifespan`: the default for `nil` or zero, at
  /// most ``maximumIdleTimeout``.
  public func idleTimeout(forLifespan lifespan: Duration?) -> Duration {
    guard let lifespan, lifespan > .zero else { return defaultIdleTimeout }
    return min(lifespan, maximumIdleTimeout)
  }
}
