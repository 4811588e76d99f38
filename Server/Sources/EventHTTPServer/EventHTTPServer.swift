import EventProtocol
import EventServer
import Foundation
import Hummingbird
import Logging
import NIOCore
import SQLiteServerLog
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Where and how an ``EventHTTPServer`` runs.
public struct EventHTTPServerConfiguration: Sendable {
  /// The address to listen on; loopback by default.
  public var host = "127.0.0.1"
  /// The port; 0 picks a free one (reported to `onRunning`).
  public var port = 8080
  /// Who each request is from: ``APIKeys`` by default, or the host's own accounts.
  public var authenticator: any Authenticator
  /// The backends' keys (``ServiceIdentity``), which write on users' behalf through
  /// `POST /api/v1/service/mutation_batches`; the route is not served without them. A single server's
  /// only: a node of a partitioned cluster refuses to start with them.
  public var serviceKeys: APIKeys?
  /// How many requests each user may make.
  public var rateLimit = RateLimiter.Policy()
  /// What a request may carry.
  public var limits = RequestLimits()
  /// The event server's limits and timings (heartbeats, lifetimes, queue sizes).
  public var eventServer = EventServerConfiguration()
  /// Where the state is kept: the input log and snapshots (`event-server.sqlite`) and blobs (`blobs/`).
  /// Every write is durable before it is answered. Nothing is kept when `nil`.
  public var dataDirectory: URL?
  /// How often a snapshot is written while running, whatever the work (snapshots are also written by
  /// ``snapshots``, and on shutdown); `nil`: only those.
  public var snapshotInterval: Duration? = .seconds(60)
  /// When a snapshot is written by the work a restart would redo, whatever the uptime: the default keeps a
  /// restart's replay no larger than its snapshot past 1,000 records, through a crash loop too.
  public var snapshots = SnapshotSchedule.byWork
  /// How many connections are kept, and how long one may stay without authenticating.
  public var connections = ConnectionLimits()
  /// How long a connection may stay silent: above the longest parked poll (55 s).
  public var idleTimeout: Duration = .seconds(120)
  /// The port of the lean poll listener (``PollListener``), which serves `GET` and `DELETE /api/v1/events`
  /// below Hummingbird, at a fraction of a parked poll's memory and of a short poll's CPU
  /// (docs/performance.md); none when `nil`, a free one when 0. It binds ``host``. The main listener serves
  /// the same route too, so clients may use either; behind nginx, route `/api/v1/events` to this port.
  public var pollPort: Int?
  /// The port of the admin listener (`/healthz`, `/readyz`, `/metrics`); none when `nil`, a free one when 0.
  public var adminPort: Int?
  /// The version of the application served, as `/metrics` reports it (`event_server_build_info`'s `version`
  /// label); the library's version when `nil`, as `event-server` reports its own.
  public var applicationVersion: String?
  /// The address the admin listener binds (loopback by default: it answers without a key).
  public var adminHost = "127.0.0.1"
  /// The schema changes of the application's own tables, applied in order at start, before serving, in the
  /// database that holds the input log (SQLite in ``dataDirectory``, or the PostgreSQL log given to the
  /// server); see docs/upgrading.md. A start whose migrations are refused or fail stops with one line,
  /// nothing changed (a failing migration is rolled back). Empty by default.
  public var migrations: [SchemaMigration] = []
  /// How long a shutdown waits for the requests under way (after the parked polls were answered) before
  /// cancelling them; the state is written either way.
  public var shutdownGrace: Duration = .seconds(5)

  /// A configuration with these keys and the defaults.
  public init(keys: APIKeys) {
    self.authenticator = keys
  }

  /// A configuration with the host's own accounts and the defaults.
  public init(authenticator: any Authenticator) {
    self.authenticator = authenticator
  }
}

/// The HTTP event server: an `EventServer` behind Hummingbird, with API keys, rate limits, state kept across
/// restarts, and a graceful shutdown in the order that loses nothing.
///
/// On start it loads the application state and the queue dump from the data directory, if there, so clients
/// resume without registering. On shutdown (SIGTERM, SIGINT, or ``shutdown()``) it first answers every parked
/// poll (clients poll again and find the server gone, then back), then lets HTTP finish the requests under
/// way, then writes the state.
///
/// ```swift
/// let server = EventHTTPServer(application: VideoServer(), configuration: configuration, logger: logger) {
///   router, events, gate in BlobRoutes(server: events, blobs: blobs, gate: gate, now: now).add(to: router)
/// }
/// try await server.run()
/// ```
public final class EventHTTPServer<Application: ServerApplication & Codable>: Sendable
where Application.Command: Codable & Equatable {
  /// Adds routes beyond the events API (such as the video domain's blobs).
  public typealias ExtraRoutes =
    @Sendable (Router<EventRequestContext>, EventServer<Application, ContinuousClock>, RequestGate) -> Void
  /// Starts the event server of a stored application on its database.
  typealias StoredStart =
    @Sendable (any TransactionalServerLog, EventServerConfiguration, any PushGateway, SnapshotSchedule) async throws ->
    (
      EventServer<Application, ContinuousClock>, LogRecoveryReport
    )
  /// Starts a cluster node of a stored application on a shared database.
  typealias StoredJoin =
    @Sendable (any TransactionalSharedLog, EventServerConfiguration, any PushGateway, SnapshotSchedule) async throws ->
    (
      EventServer<Application, ContinuousClock>, LogRecoveryReport
    )

  /// The configuration.
  public let configuration: EventHTTPServerConfiguration
  private let initialApplication: Application
  private let logger: Logger
  private let pushGateway: any PushGateway
  /// Whether a gateway was given (pushes go to a platform) rather than the logging default.
  private let sendsPushes: Bool
  private let extraRoutes: ExtraRoutes?
  private let periodicTasks: [PeriodicTask<Application>]
  private let suppliedLog: (any ServerLog)?
  /// How a stored application's server starts (``init(storedApplication:configuration:logger:pushGateway:log:periodicTasks:extraRoutes:)``).
  private let storedStart: StoredStart?
  /// How a stored application's cluster node starts, on a shared database (PostgreSQL).
  private let storedJoin: StoredJoin?
  private let group = GracefulServices()
  private let current = Mutex<EventServer<Application, ContinuousClock>?>(nil)
  /// What the server measures; `GET /metrics` on the admin listener shows it.
  public let metrics: ServerMetrics

  /// A server for `application` (used when the log holds no saved state).
  ///
  /// The input log and snapshots go to `log` when given (a `PostgresServerLog`, say: the caller opens and
  /// closes it), else to SQLite in the configuration's data directory, else nowhere (state in memory).
  public convenience init(
    application: Application,
    configuration: EventHTTPServerConfiguration,
    logger: Logger,
    pushGateway: (any PushGateway)? = nil,
    log: (any ServerLog)? = nil,
    periodicTasks: [PeriodicTask<Application>] = [],
    extraRoutes: ExtraRoutes? = nil
  ) {
    self.init(
      application: application,
      storedStart: nil,
      storedJoin: nil,
      configuration: configuration,
      logger: logger,
      pushGateway: pushGateway,
      log: log,
      periodicTasks: periodicTasks,
      extraRoutes: extraRoutes
    )
  }

  /// A server for a stored application, whose state lives in tables of the database that holds the log:
  /// SQLite in the configuration's data directory, or `log` when given (a `PostgresServerLog`, served as one
  /// server). Its migrations are applied at start; it needs one of the two.
  ///
  /// ```swift
  /// let server = EventHTTPServer(storedApplication: StoredNoteBoard(), configuration: configuration, logger: logger)
  /// try await server.run()
  /// ```
  public convenience init<Stored: StoredApplication>(
    storedApplication: Stored,
    configuration: EventHTTPServerConfiguration,
    logger: Logger,
    pushGateway: (any PushGateway)? = nil,
    log: (any TransactionalServerLog)? = nil,
    periodicTasks: [PeriodicTask<Application>] = [],
    extraRoutes: ExtraRoutes? = nil
  ) where Application == StoredRelay<Stored> {
    self.init(
      application: StoredRelay<Stored>(),
      storedStart: { log, eventServer, pushGateway, snapshots in
        try await EventServer.serving(
          storedApplication,
          from: log,
          configuration: eventServer,
          clock: ContinuousClock(),
          pushGateway: pushGateway,
          snapshots: snapshots
        )
      },
      storedJoin: { log, eventServer, pushGateway, snapshots in
        try await EventServer.joining(
          storedApplication,
          on: log,
          configuration: eventServer,
          clock: ContinuousClock(),
          pushGateway: pushGateway,
          replication: ReplicationSettings(snapshots: snapshots)
        )
      },
      configuration: configuration,
      logger: logger,
      pushGateway: pushGateway,
      log: log,
      periodicTasks: periodicTasks,
      extraRoutes: extraRoutes
    )
  }

  private init(
    application: Application,
    storedStart: StoredStart?,
    storedJoin: StoredJoin?,
    configuration: EventHTTPServerConfiguration,
    logger: Logger,
    pushGateway: (any PushGateway)?,
    log: (any ServerLog)?,
    periodicTasks: [PeriodicTask<Application>],
    extraRoutes: ExtraRoutes?
  ) {
    self.storedStart = storedStart
    self.storedJoin = storedJoin
    self.suppliedLog = log
    self.periodicTasks = periodicTasks
    self.initialApplication = application
    self.configuration = configuration
    self.metrics = ServerMetrics(applicationVersion: configuration.applicationVersion ?? ServerMetrics.version)
    self.logger = logger
    self.pushGateway = pushGateway ?? LoggingPushGateway(logger: logger)
    self.sendsPushes = pushGateway != nil
    self.extraRoutes = extraRoutes
  }

  /// The SQLite database that holds the input log and snapshots.
  public var databaseURL: URL? { configuration.dataDirectory?.appendingPathComponent("event-server.sqlite") }

  /// Runs until shut down, then writes the state.
  /// - Parameters:
  ///   - handleSignals: Whether SIGTERM and SIGINT shut it down (the executable); tests call ``shutdown()``.
  ///   - onRunning: Called with the port once the server listens.
  ///   - onAdminRunning: Called with the admin listener's port once it listens (when ``EventHTTPServerConfiguration/adminPort`` is set).
  ///   - onPollRunning: Called with the lean poll listener's port once it listens (when
  ///     ``EventHTTPServerConfiguration/pollPort`` is set).
  /// - Throws: When the saved state cannot be read, the port cannot be bound, or the state cannot be written.
  public func run(
    handleSignals: Bool = true,
    onRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    onAdminRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    onPollRunning: @escaping @Sendable (Int) async -> Void = { _ in }
  ) async throws {
    let events: EventServer<Application, ContinuousClock>
    var database: SQLiteServerLog?
    var durable: (any ServerLog)?
    // One process per data directory (its database, its blobs), whichever log it uses: a second server on it
    // is refused in one line. The system releases the lock when the process dies.
    var directoryLock: ExclusiveFileLock?
    if let directory = configuration.dataDirectory {
      do {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        directoryLock = try ExclusiveFileLock.acquire(path: directory.appendingPathComponent("event-server.lock").path)
      } catch let failure as ExclusiveFileLock.Failure where failure.isHeldElsewhere {
        throw StateError("the data directory \(directory.path) is in use: \(failure) (one server per data directory)")
      }
    }
    defer { directoryLock?.release() }
    do {
      events = try await startEventServer(database: &database, durable: &durable)
    } catch {
      await database?.close()
      throw error
    }
    try await serve(
      events,
      database: database,
      durable: durable,
      onRunning: onRunning,
      onAdminRunning: onAdminRunning,
      onPollRunning: onPollRunning,
      handleSignals: handleSignals
    )
  }

  /// Opens the log (SQLite in the data directory unless one was supplied) and recovers the server from it.
  private func startEventServer(
    database: inout SQLiteServerLog?,
    durable: inout (any ServerLog)?
  ) async throws -> EventServer<Application, ContinuousClock> {
    let events: EventServer<Application, ContinuousClock>
    if let suppliedLog {
      durable = suppliedLog
    } else if let databaseURL {
      let log = try await SQLiteServerLog.open(path: databaseURL.path)
      database = log
      durable = log
    }
    if let storedStart {
      return try await startStoredServer(storedStart, on: durable)
    }
    if suppliedLog == nil, let log = database, let directory = configuration.dataDirectory {
      try await LegacyDumpImport(directory: directory, logger: logger).importIfNeeded(
        into: log,
        application: Application.self
      )
    }
    try await applyMigrations(to: durable)
    if let durable {
      let (server, report): (EventServer<Application, ContinuousClock>, LogRecoveryReport)
      if let shared = durable as? any SharedServerLog {
        // A log several nodes share (PostgreSQL): this server is one node of a cluster on it.
        (server, report) = try await EventServer.joining(
          TimedSharedLog(inner: shared, metrics: metrics),
          application: initialApplication,
          configuration: configuration.eventServer,
          clock: ContinuousClock(),
          pushGateway: pushGateway,
          replication: ReplicationSettings(snapshots: configuration.snapshots)
        )
      } else {
        (server, report) = try await EventServer.recovering(
          from: TimedServerLog(inner: durable, metrics: metrics),
          application: initialApplication,
          configuration: configuration.eventServer,
          clock: ContinuousClock(),
          pushGateway: pushGateway,
          snapshots: configuration.snapshots
        )
      }
      events = server
      let queues = await events.queueCount
      logger.info(
        "recovered from the log",
        metadata: [
          "snapshot": "\(report.snapshotPosition)", "replayed": "\(report.replayed)",
          "position": "\(report.lastPosition)", "queues": "\(queues)",
          "torn": "\(report.tornPosition.map(String.init) ?? "none")",
        ]
      )
    } else {
      events = EventServer(
        application: initialApplication,
        configuration: configuration.eventServer,
        clock: ContinuousClock(),
        pushGateway: pushGateway
      )
    }
    return events
  }

  /// Starts a stored application's server on the database that holds the log: its migrations, then the
  /// queues recovered from the log. A start-up failure is one line (a ``StateError``).
  private func startStoredServer(
    _ start: StoredStart,
    on log: (any ServerLog)?
  ) async throws -> EventServer<Application, ContinuousClock> {
    guard let log = log as? any TransactionalServerLog else {
      throw StateError(
        "this application keeps its state in database tables: give a data directory (SQLite) or PostgreSQL"
      )
    }
    let server: EventServer<Application, ContinuousClock>
    let report: LogRecoveryReport
    do {
      if let shared = log as? any TransactionalSharedLog, let storedJoin {
        // A log several nodes share (PostgreSQL): this server is one node of a cluster on it.
        // Timed, so the log-append series exist on PostgreSQL as on SQLite.
        let timed: any TransactionalSharedLog =
          (shared as? any PartitionedSharedLog).map { TimedPartitionedLog(inner: $0, metrics: metrics) } ?? shared
        (server, report) = try await storedJoin(
          timed,
          configuration.eventServer,
          pushGateway,
          configuration.snapshots
        )
      } else {
        (server, report) = try await start(
          TimedTransactionalLog(inner: log, metrics: metrics),
          configuration.eventServer,
          pushGateway,
          configuration.snapshots
        )
      }
    } catch let error as MigrationError {
      throw StateError("schema migrations: \(error)")
    }
    let queues = await server.queueCount
    logger.info(
      "recovered from the log; the application's state is in its tables",
      metadata: [
        "snapshot": "\(report.snapshotPosition)", "replayed": "\(report.replayed)",
        "position": "\(report.lastPosition)", "queues": "\(queues)",
      ]
    )
    return server
  }

  /// Applies ``EventHTTPServerConfiguration/migrations`` to the log's database, before anything is served.
  private func applyMigrations(to log: (any ServerLog)?) async throws {
    let migrations = configuration.migrations
    guard !migrations.isEmpty else { return }
    guard let log = log as? any MigratingServerLog else {
      throw StateError(
        "the application has schema migrations but no database to apply them to: give a data directory or PostgreSQL"
      )
    }
    do {
      let report = try await log.migrate(migrations)
      logger.info(
        "schema migrations",
        metadata: ["from": "\(report.from)", "to": "\(report.to)", "applied": "\(report.applied)"]
      )
    } catch {
      throw StateError("schema migrations: \(error)")
    }
  }

  /// Serves `events` over HTTP until shut down, then writes its state and closes `database`.
  private func serve(
    _ events: EventServer<Application, ContinuousClock>,
    database: SQLiteServerLog?,
    durable: (any ServerLog)?,
    onRunning: @escaping @Sendable (Int) async -> Void,
    onAdminRunning: @escaping @Sendable (Int) async -> Void,
    onPollRunning: @escaping @Sendable (Int) async -> Void,
    handleSignals: Bool
  ) async throws {
    current.withLock { $0 = events }
    let gate = RequestGate(authenticator: configuration.authenticator, policy: configuration.rateLimit) {
      Timestamp(Date())
    }
    let connections = ConnectionGuard(limits: configuration.connections, logger: logger)
    let router = configuration.eventRouter(metrics: metrics, connections: connections)
    let serviceGate = configuration.serviceKeys.map { keys in
      RequestGate(authenticator: keys, policy: configuration.rateLimit) { Timestamp(Date()) }
    }
    let routes = EventRoutes(
      server: events,
      gate: gate,
      limits: configuration.limits,
      metrics: metrics,
      pushNotificationsEnabled: sendsPushes,
      services: serviceGate
    )
    routes.add(to: router)
    extraRoutes?(router, events, gate)
    let app = configuration.eventListener(router: router, connections: connections, logger: logger) { channel in
      await onRunning(channel.localAddress?.port ?? 0)
    }
    var services: [any Service] = [app]
    if let pollPort = configuration.pollPort {
      services.append(
        PollListener(
          host: configuration.host,
          port: pollPort,
          answers: .serving(routes),
          connections: connections,
          metrics: metrics,
          idleTimeout: configuration.idleTimeout,
          formBytes: configuration.limits.formBytes,
          logger: logger,
          onRunning: onPollRunning
        )
      )
    }
    if configuration.adminPort != nil {
      let adminRouter = Router()
      AdminRoutes(server: events, metrics: metrics).add(to: adminRouter)
      // First, so it is the last to stop (a group stops its services in reverse order): `/readyz` answers
      // 503 from the shutdown's start until the API's listeners have closed.
      if let admin = configuration.adminListener(router: adminRouter, logger: logger, onRunning: onAdminRunning) {
        services.insert(admin, at: 0)
      }
    }
    if let interval = configuration.snapshotInterval, durable != nil {
      services.append(Periodically(interval: interval) { try await events.saveSnapshot() })
    }
    for task in periodicTasks {
      let logger = logger
      services.append(
        Periodically(interval: task.interval) {
          do {
            try await task.run(events)
          } catch {
            logger.warning("\(task.name) failed; it runs again at its next turn", metadata: ["error": "\(error)"])
          }
        }
      )
    }
    if durable != nil { services.append(StopOnLogFailure(server: events, logger: logger)) }
    // Last, so it is the first to hear of the shutdown: parked polls are answered before HTTP drains.
    services.append(AnswerParkedPollsOnShutdown(server: events))
    // The state is written after the group ends, also when its drain was cut at the grace.
    // A service that failed before any shutdown (a port taken, say) is thrown once the state is written.
    var serviceFailure: (any Error)?
    do {
      try await group.run(services, handleSignals: handleSignals, grace: configuration.shutdownGrace, logger: logger)
    } catch {
      serviceFailure = error
    }
    // Nothing may write to the database once it is closed (a write under way, a stored input's batch).
    await events.waitForWrites()
    if let failure = await events.logFailure {
      await database?.close()
      throw StateError("stopped: the input log failed (\(failure)); restart to recover from what is durable")
    }
    try await events.saveSnapshot()
    await events.waitForWrites()
    await database?.close()
    let count = await events.queueCount
    logger.info("stopped; snapshot written", metadata: ["queues": "\(count)"])
    if let serviceFailure { throw serviceFailure }
  }

  /// The event server behind the HTTP API while ``run(handleSignals:onRunning:)`` runs, for inspection.
  public var eventServer: EventServer<Application, ContinuousClock>? { current.withLock { $0 } }

  /// Shuts the server down gracefully: answers the parked polls, drains HTTP, writes the state.
  public func shutdown() async {
    await group.shutdown()
  }

}

/// Why the saved state could not be used.
public struct StateError: Error, CustomStringConvertible {
  /// What happened.
  public var description: String

  init(_ description: String) {
    self.description = description
  }
}

/// Waits for the graceful shutdown, then ends every parked poll so HTTP can drain at once.
private struct AnswerParkedPollsOnShutdown<Application: ServerApplication>: Service {
  let server: EventServer<Application, ContinuousClock>

  func run() async throws {
    try? await gracefulShutdown()
    await server.shutdown()
  }
}

/// Work an ``EventHTTPServer`` does on its own schedule while it runs, such as the video domain's blob
/// janitor. A failure is logged and the task runs again at its next turn.
///
/// ```swift
/// let janitor = PeriodicTask<VideoServer>(name: "blob janitor", interval: .seconds(600)) { events in
///   _ = try await VideoBlobJanitor().run(server: events, blobs: blobs, now: Timestamp(Date()))
/// }
/// ```
public struct PeriodicTask<Application: ServerApplication>: Sendable {
  /// What the logs call it.
  public var name: String
  /// The time between two runs (the first comes one interval after the start).
  public var interval: Duration
  /// The work.
  public var run: @Sendable (EventServer<Application, ContinuousClock>) async throws -> Void

  /// A task running `run` every `interval`.
  public init(
    name: String,
    interval: Duration,
    run: @escaping @Sendable (EventServer<Application, ContinuousClock>) async throws -> Void
  ) {
    self.name = name
    self.interval = interval
    self.run = run
  }
}

/// Runs `work` every `interval` until the shutdown.
///
/// A run under way at the shutdown is cancelled, not waited for: the services shut down one after another,
/// so a run waiting on the database (up to its timeout while partitions move) held the partitions' hand-over
/// behind it until the grace period ran out (`video-partition-soak.sh`: a stopped node's partitions unserved
/// for 6 s). Maintenance work is written to be cut anywhere (a SIGKILL can cut it too) and done again at
/// the next run.
struct Periodically: Service {
  let interval: Duration
  let work: @Sendable () async throws -> Void

  func run() async throws {
    while !Task.isCancelled, !Task.isShuttingDownGracefully {
      do {
        try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
      } catch {
        return
      }
      try? await cancelWhenGracefulShutdown { try await work() }
    }
  }
}

/// Stops the server when its input log fails: it can no longer make a write durable, so it must not answer
/// any, and a restart recovers from what is durable.
private struct StopOnLogFailure<Application: ServerApplication>: Service {
  let server: EventServer<Application, ContinuousClock>
  let logger: Logger

  func run() async throws {
    let failure = await cancelWhenGracefulShutdown { await server.waitForLogFailure() }
    if let failure {
      logger.critical("the input log failed; stopping: \(failure)")
      throw StateError("the input log failed: \(failure)")
    }
  }
}
