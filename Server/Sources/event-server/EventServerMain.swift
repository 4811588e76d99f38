import ArgumentParser
import AsyncHTTPClient
import CommandLineTool
import EpisodeQueue
import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Logging
import PostgresServerLog
import SampleApps
import TokenAuthentication
import VideoBlobRoutes
import VideoMessaging

/// `event-server`: the video-messaging event server over HTTP.
@main
struct EventServerMain {

  static func main() async {
    let arguments = CommandLineTool.parse(EventServerArguments.self, tool: "event-server")
    let options: Options
    do {
      options = try Options(arguments)
    } catch {
      CommandLineTool.fail(tool: "event-server", "\(error)")
    }
    if options.jsonLogs { LoggingSystem.bootstrap { label in JSONLogHandler(label: label) } }
    var logger = Logger(label: "event-server")
    logger.logLevel = options.logLevel
    let tokens: JWTAuthenticator?
    do {
      tokens = try arguments.tokens.authenticator(logger: logger)
    } catch {
      CommandLineTool.fail(tool: "event-server", "\(error)")
    }
    var configuration = EventHTTPServerConfiguration(
      authenticator: tokens.map { AuthenticationSchemes(basic: options.keys, bearer: $0) } ?? options.keys
    )
    configuration.serviceKeys = options.serviceKeys
    configuration.host = options.host
    configuration.port = options.port
    configuration.dataDirectory = options.dataDirectory
    configuration.snapshotInterval = options.snapshotInterval
    configuration.connections = options.connections
    configuration.adminPort = options.adminPort
    configuration.pollPort = options.pollPort
    configuration.adminHost = options.adminHost
    configuration.rateLimit = RateLimiter.Policy(burst: options.rateBurst, perSecond: options.ratePerSecond)
    if let heartbeat = options.heartbeat {
      configuration.eventServer.heartbeatMinimum = heartbeat
      configuration.eventServer.heartbeatMaximum = heartbeat
    }
    let adminHost = options.adminHost
    let onAdminRunning: @Sendable (Int) async -> Void = { port in
      FileHandle.standardOutput.write(Data("event-server admin on http://\(adminHost):\(port)\n".utf8))
    }
    let host = options.host
    let onPollRunning: @Sendable (Int) async -> Void = { port in
      FileHandle.standardOutput.write(Data("event-server polls on http://\(host):\(port)/api/v1/events\n".utf8))
    }
    let onRunning: @Sendable (Int) async -> Void = { port in
      // The line scripts wait for: the server is listening.
      let line =
        "event-server listening on http://\(options.host):\(port) (pid \(ProcessInfo.processInfo.processIdentifier))\n"
      FileHandle.standardOutput.write(Data(line.utf8))
    }
    // One HTTP client (HTTP/2 to APNs and FCM) for the push senders, shut down after the server.
    let pushClient = options.push.isConfigured ? HTTPClient(eventLoopGroupProvider: .singleton) : nil
    var postgres: PostgresServerLog?
    do {
      let pushGateway = try pushClient.map { try options.push.gateway(client: $0, logger: logger) }
      if let url = options.postgresURL {
        let connected = try await PostgresServerLog.connect(
          url: url,
          logger: logger,
          operationTimeout: options.postgresTimeout,
          partitions: options.partitions
        )
        postgres = connected
        logger.info("input log in PostgreSQL", metadata: ["database": "\(connected.location)"])
      }
      let log: (any ServerLog)? = postgres
      if let postgres, options.partitions != nil {
        // One node of a partitioned cluster: it serves the partitions it leases and forwards the rest.
        /// Serves `application`'s partitions on this node.
        func serve<Stored: StoredApplication>(
          _ application: Stored,
          maintenance: [PartitionedEventHTTPServer<Stored>.MaintenanceTask] = [],
          extraRoutes: PartitionedEventHTTPServer<Stored>.ExtraRoutes? = nil
        ) async throws {
          let node = PartitionedEventHTTPServer(
            storedApplication: application,
            log: postgres,
            configuration: configuration,
            logger: logger,
            pushGateway: pushGateway,
            rotation: options.nodeNumber,
            advertisedAddress: options.advertisedAddress,
            advertisedPollAddress: options.advertisedPollAddress,
            maintenance: maintenance,
            extraRoutes: extraRoutes
          )
          try await node.run(onRunning: onRunning, onPollRunning: onPollRunning, onAdminRunning: onAdminRunning)
        }
        switch options.app {
        case "videos":
          let video = PartitionedVideoServing(
            application: StoredVideoServer(),
            blobs: DatabaseBlobStore(log: postgres),
            limits: configuration.limits,
            janitor: VideoBlobJanitor(grace: options.blobGrace),
            interval: options.janitorInterval,
            logger: logger
          )
          try await serve(video.application, maintenance: [video.janitorTask], extraRoutes: video.routes)
        case "checklist": try await serve(TeamChecklist())
        default: try await serve(StoredNoteBoard())
        }
        try await pushClient?.shutdown()
        await postgres.close()
        return
      }
      switch options.app {
      case "notes":
        // The note board with its notes in a table of the database (SQLite in --data-dir, or PostgreSQL).
        let server = EventHTTPServer(
          storedApplication: StoredNoteBoard(),
          configuration: configuration,
          logger: logger,
          pushGateway: pushGateway,
          log: postgres
        )
        try await server.run(onRunning: onRunning, onAdminRunning: onAdminRunning, onPollRunning: onPollRunning)
      case "checklist":
        // A team's shared checklist in tables of the database: every write reaches the whole team.
        let server = EventHTTPServer(
          storedApplication: TeamChecklist(),
          configuration: configuration,
          logger: logger,
          pushGateway: pushGateway,
          log: postgres
        )
        try await server.run(onRunning: onRunning, onAdminRunning: onAdminRunning, onPollRunning: onPollRunning)
      case "notes-memory":
        let server = EventHTTPServer(
          application: NoteBoard(),
          configuration: configuration,
          logger: logger,
          pushGateway: pushGateway,
          log: log
        )
        try await server.run(onRunning: onRunning, onAdminRunning: onAdminRunning, onPollRunning: onPollRunning)
      case "episodes":
        let server = EventHTTPServer(
          application: EpisodeServer(admins: options.admins),
          configuration: configuration,
          logger: logger,
          pushGateway: pushGateway,
          log: log
        )
        try await server.run(onRunning: onRunning, onAdminRunning: onAdminRunning, onPollRunning: onPollRunning)
      case "videos-memory":
        let video = VideoServing<VideoServer>(options: options, limits: configuration.limits, logger: logger) {
          InMemoryVideoBlobLedger(server: $0)
        }
        let server = EventHTTPServer(
          application: VideoServer(),
          configuration: configuration,
          logger: logger,
          pushGateway: pushGateway,
          log: log,
          periodicTasks: [video.janitorTask],
          extraRoutes: video.addRoutes
        )
        try await server.run(onRunning: onRunning, onAdminRunning: onAdminRunning, onPollRunning: onPollRunning)
      default:
        // The videos, blob bindings and histories in tables of the database (SQLite in --data-dir, or PostgreSQL).
        let application = StoredVideoServer()
        let video = VideoServing<StoredRelay<StoredVideoServer>>(
          options: options,
          blobs: options.blobsInDatabase ? postgres.map { DatabaseBlobStore(log: $0) } : nil,
          limits: configuration.limits,
          logger: logger
        ) { StoredVideoBlobLedger(server: $0, application: application) }
        let server = EventHTTPServer(
          storedApplication: application,
          configuration: configuration,
          logger: logger,
          pushGateway: pushGateway,
          log: postgres,
          periodicTasks: [video.janitorTask],
          extraRoutes: video.addRoutes
        )
        try await server.run(onRunning: onRunning, onAdminRunning: onAdminRunning, onPollRunning: onPollRunning)
      }
      try await pushClient?.shutdown()
      await postgres?.close()
    } catch {
      try? await pushClient?.shutdown()
      await postgres?.close()
      FileHandle.standardError.write(Data("event-server: \(error)\n".utf8))
      exit(1)
    }
  }
}

/// The command line, as `swift-argument-parser` reads it: generated `--help`, one-line errors.
struct EventServerArguments: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "event-server",
    abstract: "Serves an application's events API (docs/protocol.md, Server/openapi.yaml) over HTTP.",
    discussion: """
      Apps: video messaging with its blobs (default), the podcast episode queue, the sample note board, or a team checklist.
      SIGTERM or SIGINT shuts down gracefully: parked polls are answered, HTTP drains, a snapshot is written.
      A restart (after a shutdown, a crash or a power cut) rebuilds the state from the snapshot and the log:
      clients resume without registering, and no acknowledged write is lost.
      """
  )

  @Option(
    help: """
      videos (default: video messaging, its videos in database tables) | videos-memory (the same service held \
      in memory and rebuilt from the log) | episodes | notes (the sample note board, its notes in a database \
      table) | notes-memory (the same board held in memory) | checklist (a team's shared checklist in database       tables, users named team/name, partitioned by team)
      """
  )
  var app = "videos"
  @Option(help: "Who may change the episode catalog, comma-separated.")
  var admins = "admin"
  @Option(help: "The address to listen on.")
  var host = "127.0.0.1"
  @Option(help: "The port (0 picks a free one and prints it).")
  var port = 8080
  @Option(name: .customLong("keys-file"), help: "API keys, one user:key per line (or set EVENT_SERVER_API_KEYS).")
  var keysFile: String?
  @Option(
    name: .customLong("service-keys-file"),
    help: "Backends' keys, one name:key per line: they write on users' behalf (POST /api/v1/service/mutation_batches)."
  )
  var serviceKeysFile: String?
  @Option(
    name: .customLong("data-dir"),
    help:
      "Where the input log, snapshots (event-server.sqlite) and blobs are kept; every write is on disk before it is answered (default: event-server-data; not with --partitions, whose state is all in PostgreSQL)."
  )
  var dataDirectory: String?
  @Option(
    name: [.customLong("snapshot-interval"), .customLong("dump-interval")],
    help: "Seconds between snapshots, so a restart replays less (0: only every 100,000 records and on shutdown)."
  )
  var snapshotInterval = 60.0
  @Option(name: .customLong("rate-burst"), help: "Requests a user may make in a burst.")
  var rateBurst = 200.0
  @Option(name: .customLong("rate-per-second"), help: "Requests per second a user may sustain.")
  var ratePerSecond = 50.0
  @Option(help: "The parked-poll heartbeat in seconds (default 45-55 s; for tests).")
  var heartbeat: Double?
  @Option(
    name: .customLong("max-connections"),
    help: "Connections open at once (default 3/4 of the descriptor limit, at most 16384)."
  )
  var maximumConnections: Int?
  @Option(
    name: .customLong("max-unauthenticated-per-peer"),
    help: "Unauthenticated connections one address may hold (default 256)."
  )
  var maximumUnauthenticatedPerPeer: Int?
  @Option(
    name: .customLong("unauthenticated-timeout"),
    help: "Seconds a connection may stay without an authenticated request (default 10)."
  )
  var unauthenticatedTimeout: Double?
  @Option(name: .customLong("janitor-interval"), help: "Seconds between deletions of released and stranded blobs.")
  var janitorInterval = 600.0
  @Option(
    name: .customLong("blob-grace"),
    help: "Seconds an upload no video claimed is kept (default 7 days: longer than an outbox retries its notice)."
  )
  var blobGrace = 604_800.0
  @Option(
    help: """
      Where --app videos keeps the video files: database (tables of the PostgreSQL database, shared by every \
      node; the default with --postgres) | files (--data-dir/blobs on this node; the default otherwise).
      """
  )
  var blobs: String?
  @Option(
    name: .customLong("admin-port"),
    help: "Serve /healthz, /readyz and /metrics (Prometheus) on this port (0 picks one); off by default."
  )
  var adminPort: Int?
  @Option(
    name: .customLong("poll-port"),
    help: """
      Also serve GET and DELETE /api/v1/events on this port (0 picks one) through the lean poll listener: a \
      parked poll costs about 8 KB there instead of 45 KB (behind nginx, route /api/v1/events to it); off by \
      default. With --partitions, polls of users another node serves are forwarded to that node's poll \
      listener.
      """
  )
  var pollPort: Int?
  @Option(name: .customLong("admin-host"), help: "The admin listener's address (it answers without a key).")
  var adminHost = "127.0.0.1"
  @Option(name: .customLong("log-format"), help: "text | json (one JSON object per line on standard error).")
  var logFormat = "text"
  @Option(
    name: .customLong("log-level"),
    help: "trace | debug | info | notice | warning | error | critical; debug adds each refused request (4xx)."
  )
  var logLevel = "info"
  @Option(
    name: .customLong("postgres"),
    help: """
      Keep the input log and snapshots in PostgreSQL (postgres://user[:password]@host[:port]/database; or set \
      EVENT_SERVER_POSTGRES_URL) instead of SQLite in --data-dir.
      """
  )
  var postgres: String?
  @Option(
    name: .customLong("postgres-timeout"),
    help: """
      Seconds a PostgreSQL read or write may take before it fails (the request is answered 503 with \
      Retry-After, well within a client's 30 s deadline).
      """
  )
  var postgresTimeout = 5.0
  @Option(
    help: """
      Partition the PostgreSQL log by user into this many partitions (1...1024, fixed when the log is created; \
      see docs/scaling.md): each node serves the partitions it leases and forwards other users' requests to \
      their node. Needs --postgres, and --app videos (the default), notes or checklist.
      """
  )
  var partitions: Int?
  @Option(
    name: .customLong("node-number"),
    help: "This node's number in a partitioned cluster (0, 1, 2...): spreads the nodes' first choices apart."
  )
  var nodeNumber = 0
  @Option(
    help: """
      The base URL the other nodes of a partitioned cluster reach this one at (default http://HOST:PORT; \
      needed when --host is 0.0.0.0 or ::).
      """
  )
  var advertise: String?
  @Option(
    name: .customLong("advertise-polls"),
    help: """
      The base URL the other nodes of a partitioned cluster reach this one's --poll-port at (default \
      http://HOST:POLL-PORT; needed with --poll-port when --host is 0.0.0.0 or ::).
      """
  )
  var advertisePolls: String?
  @OptionGroup(title: "Push notifications (without these, pushes are only logged)")
  var push: PushArguments
  @OptionGroup(title: "Bearer tokens from your identity provider (without these, API keys only)")
  var tokens: TokenArguments

  func validate() throws {
    func check<Number: Comparable>(_ name: String, _ value: Number, _ range: ClosedRange<Number>) throws {
      guard range.contains(value) else {
        throw ValidationError("--\(name) must be in \(range.lowerBound)...\(range.upperBound), not \(value)")
      }
    }
    guard ["videos", "videos-memory", "episodes", "notes", "notes-memory", "checklist"].contains(app) else {
      throw ValidationError(
        "--app must be videos, videos-memory, episodes, notes, notes-memory or checklist, not '\(app)'"
      )
    }
    if let blobs {
      guard ["database", "files"].contains(blobs) else {
        throw ValidationError("--blobs must be database or files, not '\(blobs)'")
      }
      guard app == "videos" || blobs == "files" else {
        throw ValidationError("--blobs database keeps the blobs of --app videos (the stored video service)")
      }
    }
    guard ["text", "json"].contains(logFormat) else {
      throw ValidationError("--log-format must be text or json, not '\(logFormat)'")
    }
    guard Logger.Level(rawValue: logLevel) != nil else {
      throw ValidationError(
        "--log-level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), not '\(logLevel)'"
      )
    }
    try check("port", port, 0...65535)
    try check("snapshot-interval", snapshotInterval, 0...86_400)
    try check("rate-burst", rateBurst, 1...1_000_000)
    try check("rate-per-second", ratePerSecond, 0.001...1_000_000)
    if let heartbeat { try check("heartbeat", heartbeat, 0.1...300) }
    if let maximumConnections { try check("max-connections", maximumConnections, 1...1_000_000) }
    if let maximumUnauthenticatedPerPeer {
      try check("max-unauthenticated-per-peer", maximumUnauthenticatedPerPeer, 1...1_000_000)
    }
    if let unauthenticatedTimeout { try check("unauthenticated-timeout", unauthenticatedTimeout, 0.1...3600) }
    try check("janitor-interval", janitorInterval, 0.1...86_400)
    try check("blob-grace", blobGrace, 0...31_536_000)
    if let adminPort { try check("admin-port", adminPort, 0...65535) }
    if let pollPort {
      try check("poll-port", pollPort, 0...65535)
    }
    try check("postgres-timeout", postgresTimeout, 0.1...3600)
    if let partitions {
      try check("partitions", partitions, 1...1024)
      guard dataDirectory == nil else {
        throw ValidationError(
          "--data-dir is not used by a node of a partitioned cluster (its state is all in PostgreSQL): leave it out"
        )
      }
      guard ["notes", "videos", "checklist"].contains(app) else {
        throw ValidationError(
          "--partitions serves the stored applications: --app videos, --app notes or --app checklist"
        )
      }
      guard blobs != "files" else {
        throw ValidationError("--partitions keeps the video files in the database: leave out --blobs files")
      }
      if advertise == nil, ["0.0.0.0", "::"].contains(host) {
        throw ValidationError(
          "--partitions with --host \(host) needs --advertise URL (where the other nodes reach this one)"
        )
      }
      if pollPort != nil, advertisePolls == nil, ["0.0.0.0", "::"].contains(host) {
        throw ValidationError(
          "--partitions --poll-port with --host \(host) needs --advertise-polls URL (where the other nodes reach "
            + "its poll listener)"
        )
      }
    } else if advertisePolls != nil {
      throw ValidationError(
        "--advertise-polls is for a node of a partitioned cluster: add --partitions and --poll-port"
      )
    }
    try check("node-number", nodeNumber, 0...1_000_000)
    if let advertise, URL(string: advertise)?.scheme?.hasPrefix("http") != true {
      throw ValidationError("--advertise must be an http:// or https:// URL, not '\(advertise)'")
    }
    if let advertisePolls {
      guard URL(string: advertisePolls)?.scheme?.hasPrefix("http") == true else {
        throw ValidationError("--advertise-polls must be an http:// or https:// URL, not '\(advertisePolls)'")
      }
      guard pollPort != nil else {
        throw ValidationError("--advertise-polls says where --poll-port is reached: add --poll-port")
      }
    }
  }
}

/// The command line, checked, as the server uses it.
struct Options {
  var host: String
  var port: Int
  var keys: APIKeys
  var serviceKeys: APIKeys?
  var dataDirectory: URL
  var snapshotInterval: Duration?
  var rateBurst: Double
  var ratePerSecond: Double
  var heartbeat: Duration?
  var connections = ConnectionLimits()
  var janitorInterval: Duration
  var blobGrace: Duration
  /// Whether the video files are kept in the database's tables (``DatabaseBlobStore``) rather than files.
  var blobsInDatabase: Bool
  /// The lowest level logged.
  var logLevel: Logger.Level
  var app: String
  var admins: Set<UserID>
  var adminPort: Int?
  var pollPort: Int?
  var adminHost: String
  var jsonLogs: Bool
  var push: PushArguments
  var postgresURL: String?
  var postgresTimeout: Duration
  var partitions: PartitionMap?
  var nodeNumber: Int
  var advertisedAddress: String?
  var advertisedPollAddress: String?

  struct Problem: Error, CustomStringConvertible {
    var description: String
  }

  init(_ arguments: EventServerArguments, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
    func duration(_ seconds: Double) -> Duration { .milliseconds(Int64(seconds * 1000)) }
    host = arguments.host
    port = arguments.port
    dataDirectory = URL(fileURLWithPath: arguments.dataDirectory ?? "event-server-data")
    snapshotInterval = arguments.snapshotInterval == 0 ? nil : duration(arguments.snapshotInterval)
    rateBurst = arguments.rateBurst
    ratePerSecond = arguments.ratePerSecond
    heartbeat = arguments.heartbeat.map(duration)
    if let value = arguments.maximumConnections { connections.maximumConnections = value }
    if let value = arguments.maximumUnauthenticatedPerPeer { connections.maximumUnauthenticatedPerPeer = value }
    if let value = arguments.unauthenticatedTimeout { connections.unauthenticatedTimeout = duration(value) }
    janitorInterval = duration(arguments.janitorInterval)
    blobGrace = duration(arguments.blobGrace)
    app = arguments.app
    admins = Set(arguments.admins.split(separator: ",").map { UserID(String($0)) })
    adminPort = arguments.adminPort
    pollPort = arguments.pollPort
    adminHost = arguments.adminHost
    jsonLogs = arguments.logFormat == "json"
    logLevel = Logger.Level(rawValue: arguments.logLevel) ?? .info
    push = arguments.push
    postgresURL = arguments.postgres ?? environment["EVENT_SERVER_POSTGRES_URL"]
    postgresTimeout = duration(arguments.postgresTimeout)
    partitions = arguments.partitions.flatMap(PartitionMap.init(count:))
    nodeNumber = arguments.nodeNumber
    advertisedAddress = arguments.advertise
    advertisedPollAddress = arguments.advertisePolls
    blobsInDatabase = (arguments.blobs ?? (postgresURL != nil && app == "videos" ? "database" : "files")) == "database"
    if blobsInDatabase, postgresURL == nil {
      throw Problem(description: "--blobs database keeps the blobs in PostgreSQL: pass --postgres URL")
    }
    if partitions != nil, postgresURL == nil {
      throw Problem(description: "--partitions needs the log in PostgreSQL: pass --postgres URL")
    }
    if let path = arguments.serviceKeysFile {
      guard partitions == nil else {
        throw Problem(description: "--service-keys-file is served by a single server, not with --partitions")
      }
      guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
        throw Problem(description: "cannot read the service keys file \(path)")
      }
      serviceKeys = try APIKeys.parse(text)
    }
    var keysText = environment["EVENT_SERVER_API_KEYS"]
    if let path = arguments.keysFile {
      guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
        throw Problem(description: "cannot read the keys file \(path)")
      }
      keysText = text
    }
    guard let keysText else {
      // With bearer tokens, API keys are optional.
      guard arguments.tokens.isConfigured else {
        throw Problem(
          description: "no API keys: pass --keys-file FILE or set EVENT_SERVER_API_KEYS (or configure --jwt-*)"
        )
      }
      keys = .none
      return
    }
    keys = try APIKeys.parse(keysText)
  }
}
