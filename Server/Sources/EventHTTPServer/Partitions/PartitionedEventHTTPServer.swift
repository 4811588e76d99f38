import AsyncHTTPClient
import EventProtocol
import EventServer
import Foundation
import Hummingbird
import Logging
import PartitionHosting
import PostgresServerLog
import ServiceLifecycle
import Synchronization
import UnixSignals

/// One node of a partitioned cluster over HTTP: a stored application on a PostgreSQL log of several
/// partitions (``PostgresServerLog/connect(url:logger:operationTimeout:partitions:)``), serving the users of
/// the partitions it leases (``PartitionHost``) and forwarding the others' requests to the node that serves
/// them (see `PartitionForwarding`).
///
/// Every node runs the same command line; the nodes share the database and nothing else. A node looks at the
/// leases every ``lookInterval``: it takes free partitions up to its fair share and lets the excess go, so a
/// node that starts takes a share and a node that dies (its lease session ends) leaves its partitions to the
/// others at their next look. A client keeps its queue across a move: the queue is in the partition's log.
///
/// On shutdown (SIGTERM, SIGINT, or ``shutdown()``) the node stops serving its partitions (answering their
/// parked polls and writing their acknowledgements), lets their leases go, then lets HTTP drain.
///
/// ```swift
/// let log = try await PostgresServerLog.connect(url: url, logger: logger, partitions: PartitionMap(count: 16)!)
/// let node = PartitionedEventHTTPServer(storedApplication: StoredNoteBoard(), log: log,
///                                       configuration: configuration, logger: logger)
/// try await node.run()
/// await log.close()
/// ```
public final class PartitionedEventHTTPServer<Stored: StoredApplication>: Sendable {
  /// The cluster node serving one partition.
  public typealias Node = EventServer<StoredRelay<Stored>, ContinuousClock>
  /// The partitions this process serves.
  public typealias Host = PartitionHost<StoredRelay<Stored>, ContinuousClock>

  /// The configuration (its data directory is not used: the state is in the database).
  public let configuration: EventHTTPServerConfiguration
  /// How often the node looks at the leases; a dead node's partitions are served again within about this
  /// long plus the database's notice of the session's end.
  public let lookInterval: Duration
  /// Where the other nodes reach this one; `http://<host>:<port>` of the listener when `nil`.
  public let advertisedAddress: String?
  /// Where the other nodes reach this one's lean poll listener (when
  /// ``EventHTTPServerConfiguration/pollPort`` is set); `http://<host>:<poll port>` when `nil`.
  public let advertisedPollAddress: String?
  /// What the server measures.
  public let metrics: ServerMetrics
  private let application: Stored
  private let log: PostgresServerLog
  private let rotation: Int
  private let logger: Logger
  private let pushGateway: any PushGateway
  private let sendsPushes: Bool
  private let group = GracefulServices()
  private let currentHost = Mutex<Host?>(nil)
  private let extraRoutes: ExtraRoutes?
  private let maintenance: [MaintenanceTask]

  /// Routes beside the events API (the video service's blob routes), reaching the partitions' nodes through
  /// `nodes`. The forwarding in front sends each user's request to the node serving the user's partition, so
  /// a route asking `nodes` for its user's node finds it here (or answers `503` while the partition moves).
  public typealias ExtraRoutes = @Sendable (Router<EventRequestContext>, PartitionNodes<Stored>, RequestGate) -> Void

  /// Work every node runs on a timer, on the partitions it serves (the video service's blob janitor).
  public struct MaintenanceTask: Sendable {
    /// What the logs call it.
    public var name: String
    /// The time between two runs (the first comes one interval after the start).
    public var interval: Duration
    /// The work.
    public var run: @Sendable (PartitionNodes<Stored>) async throws -> Void

    /// A task running `run` every `interval`.
    public init(
      name: String,
      interval: Duration,
      run: @escaping @Sendable (PartitionNodes<Stored>) async throws -> Void
    ) {
      self.name = name
      self.interval = interval
      self.run = run
    }
  }

  /// A node serving `storedApplication` from the partitions of `log` (the caller opens and closes it).
  /// - Parameters:
  ///   - rotation: Where this node starts looking among free partitions (its number in the cluster spreads
  ///     the nodes' first choices apart).
  ///   - advertisedAddress: The base URL the other nodes forward to; the listener's own when `nil`.
  ///   - advertisedPollAddress: The base URL the other nodes forward polls to, when this node has a lean poll
  ///     listener; the poll listener's own when `nil`.
  public init(
    storedApplication: Stored,
    log: PostgresServerLog,
    configuration: EventHTTPServerConfiguration,
    logger: Logger,
    pushGateway: (any PushGateway)? = nil,
    rotation: Int = 0,
    advertisedAddress: String? = nil,
    advertisedPollAddress: String? = nil,
    lookInterval: Duration = .seconds(1),
    maintenance: [MaintenanceTask] = [],
    extraRoutes: ExtraRoutes? = nil
  ) {
    self.extraRoutes = extraRoutes
    self.maintenance = maintenance
    self.application = storedApplication
    self.log = log
    self.configuration = configuration
    self.metrics = ServerMetrics(applicationVersion: configuration.applicationVersion ?? ServerMetrics.version)
    self.logger = logger
    self.pushGateway = pushGateway ?? LoggingPushGateway(logger: logger)
    self.sendsPushes = pushGateway != nil
    self.rotation = rotation
    self.advertisedAddress = advertisedAddress
    self.advertisedPollAddress = advertisedPollAddress
    self.lookInterval = lookInterval
  }

  /// The partitions this node serves, while ``run(handleSignals:onRunning:)`` runs.
  public var host: Host? { currentHost.withLock { $0 } }

  /// Runs until shut down.
  /// - Parameters:
  ///   - handleSignals: Whether SIGTERM and SIGINT shut it down (the executable); tests call ``shutdown()``.
  ///   - onRunning: Called with the port once the node listens and has said where (before its first look).
  /// - Throws: When the lease session cannot be opened or the port cannot be bound.
  ///   - onPollRunning: Called with the lean poll listener's port once it listens (when
  ///     ``EventHTTPServerConfiguration/pollPort`` is set).
  ///   - onAdminRunning: Called with the admin listener's port once it listens (when
  ///     ``EventHTTPServerConfiguration/adminPort`` is set): `/healthz`, `/readyz`, `/metrics`.
  public func run(
    handleSignals: Bool = true,
    onRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    onPollRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    onAdminRunning: @escaping @Sendable (Int) async -> Void = { _ in }
  ) async throws {
    guard configuration.serviceKeys == nil else { throw ServiceKeysOnPartitionsError() }
    let application = application
    let eventServer = configuration.eventServer
    let pushGateway = pushGateway
    let snapshots = configuration.snapshots
    let metrics = metrics
    let host = try await Host.open(log: log, rotation: rotation, partitionKey: { application.partitionKey(for: $0) }) {
      partition in
      try await EventServer.joining(
        application,
        on: TimedPartitionedLog(inner: partition, metrics: metrics),
        configuration: eventServer,
        clock: ContinuousClock(),
        pushGateway: pushGateway,
        replication: ReplicationSettings(snapshots: snapshots)
      ).0
    }
    currentHost.withLock { $0 = host }
    // A node that went away refuses at once; one that does not answer a connection in a second is taken as
    // gone (the client is answered 503 and sends again; the partition's next holder serves it).
    var clientConfiguration = HTTPClient.Configuration(timeout: .init(connect: .seconds(1)))
    // As many connections to each node as this node accepts from its clients: every forwarded request holds
    // one until answered, a forwarded long-poll until its events or heartbeat. AsyncHTTPClient's default of
    // 8 per host made the ninth forwarded request wait for a connection and fail after the connect timeout
    // (`PartitionedHTTPTests.forwardedRequestsPassParkedPolls`).
    clientConfiguration.connectionPool = .init(
      idleTimeout: .seconds(60),
      concurrentHTTP1ConnectionsPerHostSoftLimit: configuration.connections.maximumConnections
    )
    let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
    do {
      try await serve(
        host,
        client: client,
        handleSignals: handleSignals,
        onRunning: onRunning,
        onPollRunning: onPollRunning,
        onAdminRunning: onAdminRunning
      )
    } catch {
      await host.shutdown()
      try? await client.shutdown()
      throw error
    }
    await host.shutdown()
    try await client.shutdown()
    logger.info("stopped; every partition let go")
  }

  private func serve(
    _ host: Host,
    client: HTTPClient,
    handleSignals: Bool,
    onRunning: @escaping @Sendable (Int) async -> Void,
    onPollRunning: @escaping @Sendable (Int) async -> Void,
    onAdminRunning: @escaping @Sendable (Int) async -> Void
  ) async throws {
    let gate = RequestGate(authenticator: configuration.authenticator, policy: configuration.rateLimit) {
      Timestamp(Date())
    }
    let connections = ConnectionGuard(limits: configuration.connections, logger: logger)
    let router = configuration.eventRouter(metrics: metrics, connections: connections)
    let longPollDeadline = configuration.eventServer.heartbeatMaximum + .seconds(10)
    let pollPlacement: @Sendable (UserID) async -> PartitionForwarding<EventRequestContext>.Placement = { user in
      Self.placement(await host.pollPlacement(of: user))
    }
    router.add(
      middleware: PartitionForwarding(
        authenticator: configuration.authenticator,
        placement: { user in Self.placement(await host.placement(of: user)) },
        pollPlacement: pollPlacement,
        client: client,
        limits: configuration.limits,
        longPollDeadline: longPollDeadline
      )
    )
    let routes = EventRoutes(
      nodes: { (user: UserID) throws(EventAPIError) -> Node in
        guard let node = await host.node(for: user) else {
          throw .serviceUnavailable(
            "the user's partition is moving between nodes; send again shortly",
            retryAfter: .seconds(1)
          )
        }
        return node
      },
      gate: gate,
      limits: configuration.limits,
      metrics: metrics,
      pushNotificationsEnabled: sendsPushes
    )
    routes.add(to: router)
    let nodes = PartitionNodes(host: host)
    extraRoutes?(router, nodes, gate)
    let (ports, bound) = AsyncStream.makeStream(of: Int.self)
    let app = configuration.eventListener(router: router, connections: connections, logger: logger) { channel in
      bound.yield(channel.localAddress?.port ?? 0)
      bound.finish()
    }
    var listeners: [any Service] = []
    if configuration.adminPort != nil {
      let adminRouter = Router()
      PartitionAdminRoutes(host: host, partitionCount: log.partitions.count, metrics: metrics).add(to: adminRouter)
      // First, so it is the last to stop: `/readyz` answers 503 while the rest shuts down.
      if let admin = configuration.adminListener(router: adminRouter, logger: logger, onRunning: onAdminRunning) {
        listeners.append(admin)
      }
    }
    listeners.append(app)
    var pollPorts: AsyncStream<Int>?
    if let pollPort = configuration.pollPort {
      let (stream, pollBound) = AsyncStream.makeStream(of: Int.self)
      pollPorts = stream
      let forwarding = PollForwarding(
        placement: pollPlacement,
        authenticator: configuration.authenticator,
        client: client,
        longPollDeadline: longPollDeadline
      )
      listeners.append(
        PollListener(
          host: configuration.host,
          port: pollPort,
          answers: forwarding.answers(local: .serving(routes)),
          connections: connections,
          metrics: metrics,
          idleTimeout: configuration.idleTimeout,
          formBytes: configuration.limits.formBytes,
          logger: logger
        ) { port in
          pollBound.yield(port)
          pollBound.finish()
          await onPollRunning(port)
        }
      )
    }
    let leases = LookAtLeases(
      host: host,
      ports: ports,
      pollPorts: pollPorts,
      address: { [advertisedAddress, configuration] port in
        advertisedAddress ?? "http://\(configuration.host):\(port)"
      },
      pollAddress: { [advertisedPollAddress, configuration] port in
        advertisedPollAddress ?? "http://\(configuration.host):\(port)"
      },
      interval: lookInterval,
      logger: logger,
      onRunning: onRunning
    )
    let tasks = maintenance.map { task in
      Periodically(interval: task.interval) { [logger] in
        do {
          try await task.run(nodes)
        } catch {
          logger.warning("\(task.name) failed; it runs again at its next interval", metadata: ["error": "\(error)"])
        }
      }
    }
    // `--snapshot-interval` on a partitioned node: each partition's node it serves writes one between its
    // turns (a node rebuilding itself writes none).
    var snapshots: [any Service] = []
    if let interval = configuration.snapshotInterval {
      snapshots.append(
        Periodically(interval: interval) { [host, logger] in
          for (partition, node) in await host.nodesServed.sorted(by: { $0.key < $1.key }) {
            do {
              try await node.saveSnapshot()
            } catch {
              logger.warning(
                "a partition's snapshot failed; the log still holds everything",
                metadata: ["partition": "\(partition)", "error": "\(error)"]
              )
            }
          }
        }
      )
    }
    try await group.run(
      listeners + [leases] + tasks + snapshots,
      handleSignals: handleSignals,
      grace: configuration.shutdownGrace,
      logger: logger
    )
  }

  private static func placement(
    _ placement: Host.Placement
  ) -> PartitionForwarding<EventRequestContext>.Placement {
    switch placement {
    case .here: .here
    case .elsewhere(let address): .elsewhere(address: address)
    case .unknown: .unknown
    }
  }

  /// Shuts the node down gracefully: stops serving its partitions (answering their parked polls), lets
  /// their leases go, drains HTTP.
  public func shutdown() async {
    await group.shutdown()
  }
}

/// The nodes of the partitions a process serves, as routes and maintenance tasks reach them.
public struct PartitionNodes<Stored: StoredApplication>: Sendable {
  let host: PartitionHost<StoredRelay<Stored>, ContinuousClock>

  /// The node serving `user`'s partition here.
  /// - Throws: `SERVICE_UNAVAILABLE` with `Retry-After` when this process does not serve it (it is moving).
  public func node(for user: UserID) async throws(EventAPIError) -> PartitionedEventHTTPServer<Stored>.Node {
    guard let node = await host.node(for: user) else { throw Self.moving }
    return node
  }

  /// A node this process serves (any: every partition's node reads the application's shared tables).
  /// - Throws: `SERVICE_UNAVAILABLE` with `Retry-After` when it serves none (starting, or all moving).
  public func anyNode() async throws(EventAPIError) -> PartitionedEventHTTPServer<Stored>.Node {
    guard let node = await host.anyNode else { throw Self.moving }
    return node
  }

  private static var moving: EventAPIError {
    .serviceUnavailable("the user's partition is moving between nodes; send again shortly", retryAfter: .seconds(1))
  }
}

/// Says where the node answers, then looks at the leases on a timer until the shutdown, when it stops the
/// partitions' nodes (their parked polls answered) before HTTP drains.
private struct LookAtLeases<Stored: StoredApplication>: Service {
  let host: PartitionHost<StoredRelay<Stored>, ContinuousClock>
  let ports: AsyncStream<Int>
  /// The lean poll listener's port, when the node has one.
  let pollPorts: AsyncStream<Int>?
  let address: @Sendable (Int) -> String
  let pollAddress: @Sendable (Int) -> String
  let interval: Duration
  let logger: Logger
  let onRunning: @Sendable (Int) async -> Void

  func run() async throws {
    var iterator = ports.makeAsyncIterator()
    guard let port = await iterator.next() else { return }
    var pollPort: Int?
    if let pollPorts {
      var polls = pollPorts.makeAsyncIterator()
      guard let port = await polls.next() else { return }
      pollPort = port
    }
    try await host.advertise(address(port), pollAddress: pollPort.map(pollAddress))
    await onRunning(port)
    let looking = Task { [host, interval, logger] in
      while !Task.isCancelled {
        let changesHeard = host.leaseChangesHeard
        do {
          let change = try await host.rebalance()
          let look = await host.lastLook
          // Each part of a look that moved something or took over a second, in milliseconds: a slow
          // takeover says where it waited.
          if change != .init() || look.total > .seconds(1) {
            logger.info(
              change != .init() ? "partitions moved" : "a look at the partition leases was slow",
              metadata: [
                "taken": "\(change.taken)", "released": "\(change.released)", "lost": "\(change.lost)",
                "look_ms": "\(look.total.wholeMilliseconds)", "survey_ms": "\(look.survey.wholeMilliseconds)",
                "release_ms": "\(look.release.wholeMilliseconds)", "acquire_ms": "\(look.acquire.wholeMilliseconds)",
                "start_ms": "\(look.start.wholeMilliseconds)",
              ]
            )
          }
        } catch {
          logger.warning("a look at the partition leases failed; looking again", metadata: ["error": "\(error)"])
        }
        await host.waitForNextLook(after: interval, clock: ContinuousClock(), changesHeard: changesHeard)
      }
    }
    // At the shutdown the partitions are handed over at once, not after the look under way.
    try? await gracefulShutdown()
    looking.cancel()
    let (stoppingNodes, closingLeases) = await host.shutdown()
    logger.info(
      "partitions handed over",
      metadata: [
        "stop_nodes_ms": "\(stoppingNodes.wholeMilliseconds)", "close_leases_ms": "\(closingLeases.wholeMilliseconds)",
      ]
    )
    await looking.value
  }
}

/// A partitioned node was given service keys, which it cannot serve yet: a service's write must reach the
/// node of its user's partition, and the service route is not forwarded.
public struct ServiceKeysOnPartitionsError: Error, CustomStringConvertible {
  public var description: String {
    "service keys are served by a single server, not by a node of a partitioned cluster"
  }
}
