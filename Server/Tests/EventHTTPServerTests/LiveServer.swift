import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Logging
import UpdateMachine
import VideoBlobRoutes
import VideoMessaging

/// The users and keys every live test uses.
let testKeyByUser: [UserID: String] = ["alice": "alice-key-1", "bob": "bob-key-22", "carol": "carol-key-333"]
// Every key is longer than the minimum: this cannot throw.
let testKeys = try! APIKeys(testKeyByUser)

/// An `EventHTTPServer` serving the video domain on 127.0.0.1 and a port the system picks, in this process,
/// stopped by ``stop()`` (every test bounds its time with `.timeLimit`).
struct LiveServer {
  let server: EventHTTPServer<VideoServer>
  let task: Task<Void, any Error>
  let port: Int
  let dataDirectory: URL

  var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

  /// Starts a server; `port` 0 picks one (pass an earlier server's to restart in its place).
  static func start(
    dataDirectory: URL = FileManager.default.temporaryDirectory.appendingPathComponent("live-\(UUID())"),
    port: Int = 0,
    application: VideoServer = VideoServer(),
    janitor: (interval: Duration, grace: Duration)? = nil,
    configure: (inout EventHTTPServerConfiguration) -> Void = { _ in }
  ) async throws -> LiveServer {
    var configuration = EventHTTPServerConfiguration(keys: testKeys)
    configuration.port = port
    configuration.dataDirectory = dataDirectory
    configuration.snapshotInterval = nil
    configure(&configuration)
    var logger = Logger(label: "live-test")
    logger.logLevel = .warning
    let blobs = FileBlobStore(directory: dataDirectory.appendingPathComponent("blobs"))
    let limits = configuration.limits
    var tasks: [PeriodicTask<VideoServer>] = []
    if let janitor {
      let sweeper = VideoBlobJanitor(grace: janitor.grace)
      tasks.append(
        PeriodicTask(name: "blob janitor", interval: janitor.interval) { events in
          _ = try await sweeper.run(server: events, blobs: blobs, now: Timestamp(Date()))
        }
      )
    }
    let server = EventHTTPServer(
      application: application,
      configuration: configuration,
      logger: logger,
      periodicTasks: tasks
    ) {
      router,
      events,
      gate in
      BlobRoutes(server: events, blobs: blobs, gate: gate, limits: limits) { Timestamp(Date()) }.add(to: router)
    }
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let task = Task {
      defer { continuation.finish() }
      try await server.run(handleSignals: false) { continuation.yield($0) }
    }
    var iterator = ports.makeAsyncIterator()
    guard let bound = await iterator.next() else {
      try await task.value
      throw URLError(.cannotConnectToHost)
    }
    return LiveServer(server: server, task: task, port: bound, dataDirectory: dataDirectory)
  }

  /// Shuts down gracefully (parked polls answered, HTTP drained, state written) and waits for the end.
  func stop() async throws {
    await server.shutdown()
    try await task.value
  }

  /// The event server behind it.
  var events: EventServer<VideoServer, ContinuousClock> {
    get throws {
      guard let events = server.eventServer else { throw URLError(.cannotConnectToHost) }
      return events
    }
  }

  func removeData() {
    try? FileManager.default.removeItem(at: dataDirectory)
  }

  func transport(_ user: UserID, maximumConnections: Int = 8) -> VideoTransport {
    var configuration = VideoTransport.Configuration()
    configuration.maximumConnections = maximumConnections
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
