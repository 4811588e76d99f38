import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Logging
import Testing
import UpdateMachine
import VideoBlobRoutes
import VideoMessaging

/// The users and keys every live test uses.
let testKeyByUser: [UserID: String] = ["alice": "alice-key-1", "bob": "bob-key-22", "carol": "carol-key-333"]
// Every key is longer than the minimum: this cannot throw.
let testKeys = try! APIKeys(testKeyByUser)

/// Which video server a live test runs: the in-memory ``VideoServer`` (`--app videos-memory`) or the
/// ``StoredVideoServer`` with its tables in the data directory's SQLite database (`--app videos`).
enum VideoServerKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case memory
  case stored

  var testDescription: String { rawValue }
}

/// An `EventHTTPServer` serving the video domain on 127.0.0.1 and a port the system picks, in this process,
/// stopped by ``stop()`` (every test bounds its time with `.hangGuard`).
struct LiveServer {
  /// The server, of either kind.
  enum Host {
    case memory(EventHTTPServer<VideoServer>)
    case stored(EventHTTPServer<StoredRelay<StoredVideoServer>>, StoredVideoServer)
  }

  let host: Host
  let task: Task<Void, any Error>
  let port: Int
  let dataDirectory: URL
  /// The lean poll listener's port, when the configuration asked for one (``EventHTTPServerConfiguration/pollPort``).
  var pollPort: Int?

  var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

  /// The in-memory server (the tests that read its state directly).
  var server: EventHTTPServer<VideoServer> {
    get throws {
      guard case .memory(let server) = host else { throw URLError(.unsupportedURL) }
      return server
    }
  }

  /// Starts a server; `port` 0 picks one (pass an earlier server's to restart in its place). The blob routes
  /// ask `routesLedger` of the server's ledger (a test wraps it to fail on purpose). A stored
  /// server given `log` (a PostgreSQL log) keeps its tables and its blobs there (``DatabaseBlobStore``);
  /// otherwise its tables are in the data directory's SQLite database and its blobs in files beside it.
  static func start(
    _ kind: VideoServerKind = .memory,
    dataDirectory: URL = FileManager.default.temporaryDirectory.appendingPathComponent("live-\(UUID())"),
    port: Int = 0,
    log: (any TransactionalServerLog)? = nil,
    limits videoLimits: VideoServerLimits = VideoServerLimits(),
    janitor: (interval: Duration, grace: Duration)? = nil,
    configure: (inout EventHTTPServerConfiguration) -> Void = { _ in },
    routesLedger: @escaping @Sendable (any VideoBlobLedger) -> any VideoBlobLedger = { $0 }
  ) async throws -> LiveServer {
    var configuration = EventHTTPServerConfiguration(keys: testKeys)
    configuration.port = port
    configuration.dataDirectory = dataDirectory
    configuration.snapshotInterval = nil
    configure(&configuration)
    var logger = Logger(label: "live-test")
    logger.logLevel = .warning
    let blobs: any BlobStore =
      log.map { DatabaseBlobStore(log: $0) } ?? FileBlobStore(directory: dataDirectory.appendingPathComponent("blobs"))
    let limits = configuration.limits
    let sweeper = janitor.map { (VideoBlobJanitor(grace: $0.grace), $0.interval) }
    let host: Host
    let run:
      @Sendable (@escaping @Sendable (Int) async -> Void, @escaping @Sendable (Int) async -> Void) async throws -> Void
    switch kind {
    case .memory:
      let tasks = sweeper.map { sweeper, interval in
        [
          PeriodicTask<VideoServer>(name: "blob janitor", interval: interval) { events in
            _ = try await sweeper.run(server: events, blobs: blobs, now: Timestamp(Date()))
          }
        ]
      }
      let server = EventHTTPServer(
        application: VideoServer(limits: videoLimits),
        configuration: configuration,
        logger: logger,
        periodicTasks: tasks ?? []
      ) { router, events, gate in
        BlobRoutes(
          ledger: routesLedger(InMemoryVideoBlobLedger(server: events)),
          blobs: blobs,
          gate: gate,
          limits: limits
        ) { Timestamp(Date()) }.add(to: router)
      }
      host = .memory(server)
      run = { try await server.run(handleSignals: false, onRunning: $0, onPollRunning: $1) }
    case .stored:
      let application = StoredVideoServer(limits: videoLimits)
      let ledger:
        @Sendable (EventServer<StoredRelay<StoredVideoServer>, ContinuousClock>) -> StoredVideoBlobLedger<
          ContinuousClock
        > = { StoredVideoBlobLedger(server: $0, application: application) }
      let tasks = sweeper.map { sweeper, interval in
        [
          PeriodicTask<StoredRelay<StoredVideoServer>>(name: "blob janitor", interval: interval) { events in
            _ = try await sweeper.run(ledger: ledger(events), blobs: blobs, now: Timestamp(Date()))
          }
        ]
      }
      let server = EventHTTPServer(
        storedApplication: application,
        configuration: configuration,
        logger: logger,
        log: log,
        periodicTasks: tasks ?? []
      ) { router, events, gate in
        BlobRoutes(ledger: routesLedger(ledger(events)), blobs: blobs, gate: gate, limits: limits) {
          Timestamp(Date())
        }
        .add(to: router)
      }
      host = .stored(server, application)
      run = { try await server.run(handleSignals: false, onRunning: $0, onPollRunning: $1) }
    }
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let (pollPorts, pollContinuation) = AsyncStream.makeStream(of: Int.self)
    let task = Task {
      defer {
        continuation.finish()
        pollContinuation.finish()
      }
      try await run({ continuation.yield($0) }, { pollContinuation.yield($0) })
    }
    var iterator = ports.makeAsyncIterator()
    guard let bound = await iterator.next() else {
      try await task.value
      throw URLError(.cannotConnectToHost)
    }
    var live = LiveServer(host: host, task: task, port: bound, dataDirectory: dataDirectory)
    if configuration.pollPort != nil {
      var pollIterator = pollPorts.makeAsyncIterator()
      guard let pollBound = await pollIterator.next() else {
        try await task.value
        throw URLError(.cannotConnectToHost)
      }
      live.pollPort = pollBound
    }
    return live
  }

  /// Shuts down gracefully (parked polls answered, HTTP drained, state written) and waits for the end.
  func stop() async throws {
    switch host {
    case .memory(let server): await server.shutdown()
    case .stored(let server, _): await server.shutdown()
    }
    try await task.value
  }

  /// The in-memory event server behind it.
  var events: EventServer<VideoServer, ContinuousClock> {
    get throws {
      guard let events = try server.eventServer else { throw URLError(.cannotConnectToHost) }
      return events
    }
  }

  /// The server's blob keys, whichever its kind.
  var ledger: any VideoBlobLedger {
    get throws {
      switch host {
      case .memory(let server):
        guard let events = server.eventServer else { throw URLError(.cannotConnectToHost) }
        return InMemoryVideoBlobLedger(server: events)
      case .stored(let server, let application):
        guard let events = server.eventServer else { throw URLError(.cannotConnectToHost) }
        return StoredVideoBlobLedger(server: events, application: application)
      }
    }
  }

  /// How many videos the server tracks, whichever its kind.
  func trackedVideoCount() async throws -> Int {
    switch host {
    case .memory: return try await events.application.videos.count
    case .stored(let server, _):
      guard let events = server.eventServer else { throw URLError(.cannotConnectToHost) }
      return try await events.readStoredState { transaction in
        Int(try await transaction.execute("SELECT count(*) AS n FROM videos").first?["n"]?.integer ?? -1)
      }
    }
  }

  func removeData() {
    try? FileManager.default.removeItem(at: dataDirectory)
  }

  /// A transport for `user`; `longPollTimeout` is how long it waits for a poll's answer (the default when `nil`).
  func transport(_ user: UserID, maximumConnections: Int = 8, longPollTimeout: Duration? = nil) -> VideoTransport {
    var configuration = VideoTransport.Configuration()
    configuration.maximumConnections = maximumConnections
    if let longPollTimeout { configuration.longPollTimeout = longPollTimeout }
    let key = testKeyByUser[user] ?? "no-such-key"
    return VideoTransport(baseURL: url, credentials: .init(user: user, apiKey: key), configuration: configuration)
  }
}

typealias VideoTransport = URLSessionTransport<VideoSnapshot, VideoEvent, VideoCommand>
typealias VideoMachine = UpdateMachine<VideoSnapshot, VideoEvent, VideoCommand>

/// A machine for `user` over `transport`, with short backoffs so recoveries take well under a second.
func makeMachine(
  _ transport: some EventTransport<VideoSnapshot, VideoEvent, VideoCommand>,
  store: any UpdateStore = InMemoryStore()
) -> VideoMachine {
  var configuration = UpdateMachineConfiguration()
  configuration.backoff = BackoffPolicy(base: .milliseconds(50), cap: .milliseconds(400))
  configuration.outboxBackoff = BackoffPolicy(base: .milliseconds(50), cap: .milliseconds(400))
  return UpdateMachine(reducer: VideoReducer(), transport: transport, store: store, configuration: configuration)
}

/// Waits until a snapshot of `machine` satisfies `condition`; the test's time limit catches a hang.
@discardableResult
func waitFor(
  _ machine: VideoMachine,
  _ condition: @Sendable (VideoMachine.Snapshot) -> Bool
) async -> VideoMachine.Snapshot? {
  for await snapshot in await machine.snapshots() where condition(snapshot) {
    return snapshot
  }
  return nil
}

/// Whether the machine is long-polling.
@Sendable func isPolling(_ snapshot: VideoMachine.Snapshot) -> Bool {
  if case .polling = snapshot.phase { return true }
  return false
}

/// An upload command for a video of `size` bytes to `recipient`.
func upload(_ video: String, to recipient: UserID, size: Int = 3) -> VideoCommand {
  .uploaded(
    VideoUpload(
      video: VideoID(rawValue: video),
      recipient: recipient,
      blobKey: BlobKey(rawValue: "blob-\(video)"),
      size: size
    )
  )
}
