import EpisodeQueue
import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Logging
import SampleApps
import VideoBlobRoutes
import VideoMessaging

/// `event-server`: the video-messaging event server over HTTP.
@main
struct EventServerMain {
  static let usage = """
    Usage: event-server [options]

    Serves an application's events API (docs/protocol.md, Server/openapi.yaml) over HTTP: video messaging
    with its blobs (default), or the podcast episode queue.

    Options:
      --app NAME               videos (default) | episodes | notes (the sample note board, for soak tests)
      --admins USERS           who may change the episode catalog, comma-separated (default admin)
      --host HOST              address to listen on (default 127.0.0.1)
      --port PORT              port (default 8080; 0 picks a free one and prints it)
      --keys-file FILE         API keys, one user:key per line (or set EVENT_SERVER_API_KEYS="alice:key,bob:key")
      --data-dir DIR           where the input log and snapshots (event-server.sqlite) and blobs are kept
                               (default ./event-server-data); every write is on disk before it is answered
      --snapshot-interval SECONDS
                               write a snapshot this often, so a restart replays less (default 60; 0: only
                               every 100,000 records and on shutdown; --dump-interval is the old name)
      --rate-burst N           requests a user may make in a burst (default 200)
      --rate-per-second N      requests per second a user may sustain (default 50)
      --heartbeat SECONDS      the parked-poll heartbeat (default 45-55 s; for tests)
      --max-connections N      connections open at once (default 3/4 of the descriptor limit, at most 16384)
      --max-unauthenticated-per-peer N
                               unauthenticated connections one address may hold (default 256)
      --unauthenticated-timeout SECONDS
                               how long a connection may stay without an authenticated request (default 10)
      --janitor-interval SECONDS
                               how often released and stranded blobs are deleted (videos; default 600)
      --blob-grace SECONDS     how old an upload no video claimed must be before it is deleted (default
                               604800, 7 days: longer than an outbox retries its notice)
      --admin-port PORT        serve /healthz, /readyz and /metrics (Prometheus) on this port (0 picks one and
                               prints it); off by default
      --admin-host HOST        the admin listener's address (default 127.0.0.1: it answers without a key)
      --log-format FORMAT      text (default) | json: one JSON object per line on standard error
      --help                   this text

    SIGTERM or SIGINT shuts down gracefully: parked polls are answered, HTTP drains, a snapshot is written.
    A restart (after a shutdown, a crash or a power cut) rebuilds the state from the snapshot and the log:
    clients resume without registering, and no acknowledged write is lost.
    """

  static func main() async {
    let options: Options
    do {
      options = try Options(arguments: Array(CommandLine.arguments.dropFirst()))
    } catch {
      FileHandle.standardError.write(Data("event-server: \(error) (see --help)\n".utf8))
      exit(2)
    }
    if options.help {
      print(usage)
      return
    }
    if options.jsonLogs { LoggingSystem.bootstrap { label in JSONLogHandler(label: label) } }
    var logger = Logger(label: "event-server")
    logger.logLevel = .info
    var configuration = EventHTTPServerConfiguration(keys: options.keys)
    configuration.host = options.host
    configuration.port = options.port
    configuration.dataDirectory = options.dataDirectory
    configuration.snapshotInterval = options.snapshotInterval
    configuration.connections = options.connections
    configuration.adminPort = options.adminPort
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
    let onRunning: @Sendable (Int) async -> Void = { port in
      // The line scripts wait for: the server is listening.
      let line =
        "event-server listening on http://\(options.host):\(port) (pid \(ProcessInfo.processInfo.processIdentifier))\n"
      FileHandle.standardOutput.write(Data(line.utf8))
    }
    do {
      switch options.app {
      case "notes":
        let server = EventHTTPServer(application: NoteBoard(), configuration: configuration, logger: logger)
        try await server.run(onRunning: onRunning, onAdminRunning: onAdminRunning)
      case "episodes":
        let server = EventHTTPServer(
          application: EpisodeServer(admins: options.admins),
          configuration: configuration,
          logger: logger
        )
        try await server.run(onRunning: onRunning, onAdminRunning: onAdminRunning)
      default:
        let blobs = FileBlobStore(directory: options.dataDirectory.appendingPathComponent("blobs"))
        let limits = configuration.limits
        let janitor = VideoBlobJanitor(grace: options.blobGrace)
        let janitorLogger = logger
        let janitorTask = PeriodicTask<VideoServer>(name: "blob janitor", interval: options.janitorInterval) {
          events in
          let deleted = try await janitor.run(server: events, blobs: blobs, now: Timestamp(Date()))
          if !deleted.isEmpty { janitorLogger.info("blob janitor deleted \(deleted.count) blobs") }
        }
        let server = EventHTTPServer(
          application: VideoServer(),
          configuration: configuration,
          logger: logger,
          periodicTasks: [janitorTask]
        ) {
          router,
          events,
          gate in
          BlobRoutes(server: events, blobs: blobs, gate: gate, limits: limits) { Timestamp(Date()) }.add(to: router)
        }
        try await server.run(onRunning: onRunning, onAdminRunning: onAdminRunning)
      }
    } catch {
      FileHandle.standardError.write(Data("event-server: \(error)\n".utf8))
      exit(1)
    }
  }
}

/// The command line, checked.
struct Options {
  var host = "127.0.0.1"
  var port = 8080
  var keys = APIKeys.none
  var dataDirectory = URL(fileURLWithPath: "event-server-data")
  var snapshotInterval: Duration? = .seconds(60)
  var rateBurst = 200.0
  var ratePerSecond = 50.0
  var heartbeat: Duration?
  var connections = ConnectionLimits()
  var janitorInterval: Duration = .seconds(600)
  var blobGrace: Duration = .seconds(7 * 24 * 3600)
  var app = "videos"
  var adminPort: Int?
  var adminHost = "127.0.0.1"
  var jsonLogs = false
  var admins: Set<UserID> = ["admin"]
  var help = false

  struct Problem: Error, CustomStringConvertible {
    var description: String
  }

  init(arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment) throws {
    var keysText = environment["EVENT_SERVER_API_KEYS"]
    var remaining = arguments[...]
    func value(_ name: String) throws -> String {
      guard let value = remaining.popFirst(), !value.hasPrefix("--") else {
        throw Problem(description: "\(name) needs a value")
      }
      return value
    }
    func number(_ name: String, in range: ClosedRange<Double>) throws -> Double {
      let text = try value(name)
      guard let number = Double(text), range.contains(number) else {
        throw Problem(
          description: "\(name) must be a number in \(range.lowerBound)...\(range.upperBound), not '\(text)'"
        )
      }
      return number
    }
    while let argument = remaining.popFirst() {
      switch argument {
      case "--help", "-h": help = true
      case "--host": host = try value(argument)
      case "--port": port = Int(try number(argument, in: 0...65535))
      case "--keys-file":
        let path = try value(argument)
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
          throw Problem(description: "cannot read the keys file \(path)")
        }
        keysText = text
      case "--data-dir": dataDirectory = URL(fileURLWithPath: try value(argument))
      case "--snapshot-interval", "--dump-interval":
        let seconds = try number(argument, in: 0...86_400)
        snapshotInterval = seconds == 0 ? nil : .milliseconds(Int64(seconds * 1000))
      case "--rate-burst": rateBurst = try number(argument, in: 1...1_000_000)
      case "--rate-per-second": ratePerSecond = try number(argument, in: 0.001...1_000_000)
      case "--app":
        app = try value(argument)
        guard ["videos", "episodes", "notes"].contains(app) else {
          throw Problem(description: "--app must be videos, episodes or notes, not '\(app)'")
        }
      case "--admins":
        admins = Set(try value(argument).split(separator: ",").map { UserID(String($0)) })
      case "--heartbeat": heartbeat = .milliseconds(Int64(try number(argument, in: 0.1...300) * 1000))
      case "--max-connections": connections.maximumConnections = Int(try number(argument, in: 1...1_000_000))
      case "--max-unauthenticated-per-peer":
        connections.maximumUnauthenticatedPerPeer = Int(try number(argument, in: 1...1_000_000))
      case "--unauthenticated-timeout":
        connections.unauthenticatedTimeout = .milliseconds(Int64(try number(argument, in: 0.1...3600) * 1000))
      case "--janitor-interval":
        janitorInterval = .milliseconds(Int64(try number(argument, in: 0.1...86_400) * 1000))
      case "--admin-port": adminPort = Int(try number(argument, in: 0...65535))
      case "--admin-host": adminHost = try value(argument)
      case "--log-format":
        let format = try value(argument)
        guard ["text", "json"].contains(format) else {
          throw Problem(description: "--log-format must be text or json, not '\(format)'")
        }
        jsonLogs = format == "json"
      case "--blob-grace": blobGrace = .milliseconds(Int64(try number(argument, in: 0...31_536_000) * 1000))
      default: throw Problem(description: "unknown option '\(argument)'")
      }
    }
    if help { return }
    guard let keysText else {
      throw Problem(description: "no API keys: pass --keys-file FILE or set EVENT_SERVER_API_KEYS")
    }
    keys = try APIKeys.parse(keysText)
  }
}
