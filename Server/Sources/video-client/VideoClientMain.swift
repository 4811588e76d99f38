import ArgumentParser
import CommandLineTool
import EventProtocol
import Foundation
import UpdateMachine
import VideoMessaging

/// `video-client`: one user's video-messaging device over HTTP, for the end-to-end script.
///
/// It sends `--count` recordings to `--peer` (one every `--interval`), downloads and marks viewed every
/// video it receives, checks each received file's bytes, and exits 0 once everything it sent was viewed and
/// it has received and verified `--expect` videos; 1 when `--timeout` passes first.
@main
struct VideoClientMain {
  static func main() async {
    let options = ClientOptions(CommandLineTool.parse(VideoClientArguments.self, tool: "video-client"))
    let outcome = await Task.detached { await run(options) }.value
    print(outcome.summary)
    exit(outcome.succeeded ? 0 : 1)
  }

  struct Outcome {
    var summary: String
    var succeeded: Bool
  }

  static func run(_ options: ClientOptions) async -> Outcome {
    let credentials = HTTPCredentials(user: options.user, apiKey: options.key)
    var configuration = UpdateMachineConfiguration()
    configuration.backoff = BackoffPolicy(base: .milliseconds(100), cap: .seconds(1))
    configuration.outboxBackoff = BackoffPolicy(base: .milliseconds(100), cap: .seconds(1))
    let device = VideoDevice(
      user: options.user,
      transport: URLSessionTransport<VideoSnapshot, VideoEvent, VideoCommand>(
        baseURL: options.server,
        credentials: credentials
      ),
      store: FileStore(url: options.stateDirectory.appendingPathComponent("record.json")),
      remoteBlobs: FailureLoggingBlobStore(
        user: options.user,
        base: HTTPBlobStore(endpoint: HTTPEndpoint(baseURL: options.server, credentials: credentials))
      ),
      localBlobs: FileBlobStore(directory: options.stateDirectory.appendingPathComponent("blobs")),
      clock: ContinuousClock(),
      configuration: configuration,
      seed: UInt64.random(in: 0...UInt64.max),
      chunkSize: 16 << 10,
      log: EngineLog(user: options.user).write
    )
    let events = await device.events()
    await device.start()
    let deadline = ContinuousClock.now + options.timeout
    // Once the machine holds the server's state, its queue is registered: a script waits for this line
    // before its faults, so that a later registration can only mean a lost queue (registers retried on a
    // failure before the first answer are not that).
    let registered = Task {
      var snapshot = await device.machine.snapshot
      while ContinuousClock.now < deadline, snapshot.confirmedState == nil {
        try await Task.sleep(for: .milliseconds(50))
        snapshot = await device.machine.snapshot
      }
      guard snapshot.confirmedState != nil else { return }
      // Written at once (`print` is buffered when the output is a file).
      let line = "\(options.user): registered after \(snapshot.metrics.registers) register requests\n"
      FileHandle.standardOutput.write(Data(line.utf8))
    }
    let verified = VerifiedCount()
    let viewer = Task {
      for await event in events {
        guard case .delivered(let delivered) = event else { continue }
        let local = FileBlobStore(directory: options.stateDirectory.appendingPathComponent("blobs"))
        let bytes = try? await local.read(delivered.localKey, offset: 0, length: delivered.video.size)
        // Marked viewed before it counts: the client stops only once its "viewed" writes are sent.
        await device.markViewed(delivered.video.id)
        if let bytes, Recording.isValid(bytes) { await verified.add() }
      }
    }
    for index in 0..<options.count {
      _ = await device.send(Recording.make(from: options.user, index: index), to: options.peer)
      try? await Task.sleep(for: options.interval)
    }
    var outgoingViewed = 0
    while ContinuousClock.now < deadline {
      let snapshot = await device.machine.snapshot
      outgoingViewed = snapshot.confirmedState?.outgoing.filter { $0.status == .viewed }.count ?? 0
      // Done when the peer has viewed everything sent, everything received is verified, and every write of
      // ours (a "viewed" among them) has been acknowledged: stopping earlier would leave the peer waiting.
      if outgoingViewed == options.count, await verified.value >= options.expect, snapshot.pendingMutations.isEmpty {
        break
      }
      try? await Task.sleep(for: .milliseconds(100))
    }
    viewer.cancel()
    registered.cancel()
    let final = await device.machine.snapshot
    let metrics = final.metrics
    let notViewed = (final.confirmedState?.outgoing ?? []).filter { $0.status != .viewed }
      .map { "\($0.id.rawValue) \($0.status)" }
    await device.stop()
    let received = await verified.value
    let succeeded = outgoingViewed == options.count && received >= options.expect
    return Outcome(
      summary: "\(options.user): sent \(options.count), viewed by \(options.peer) \(outgoingViewed); "
        + "received and verified \(received) of \(options.expect); registers \(metrics.registers), "
        + "polls \(metrics.polls), failures \(metrics.failures), writes refused \(final.rejectedMutations.count)"
        + final.rejectedMutations.map { " (\($0.mutation): \($0.reason))" }.joined()
        + " — \(succeeded ? "converged" : "NOT converged")"
        + (succeeded
          ? ""
          : "; writes pending \(final.pendingMutations.count), not viewed: \(notViewed.joined(separator: ", "))"),
      succeeded: succeeded
    )
  }
}

/// The engine's register requests, failed requests and phase changes, one line each on the standard error
/// with the seconds since start: what a soak that finds a second registration prints to say why.
struct EngineLog: Sendable {
  let user: UserID
  let start = ContinuousClock.now

  @Sendable func write(_ event: UpdateMachineLogEvent) {
    switch event {
    case .requestSent(_, .register), .requestFailed, .phaseChanged, .clientIDChanged:
      let elapsed = (ContinuousClock.now - start).components
      let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
      let line = "\(user) engine \(String(format: "%.3f", seconds)) s: \(event)\n"
      FileHandle.standardError.write(Data(line.utf8))
    default:
      return
    }
  }
}

/// Recordings whose bytes check themselves: a header naming the sender and index, then a pattern derived
/// from it, so the receiver can tell a whole, uncorrupted file without knowing what was sent.
enum Recording {
  static func make(from user: UserID, index: Int) -> Data {
    let header = Data("\(user.rawValue)#\(index)\n".utf8)
    let seed = UInt8(truncatingIfNeeded: header.reduce(0) { $0 &+ Int($1) })
    let body = (0..<(40_000 + index * 997)).map { UInt8(truncatingIfNeeded: $0 &* 31) &+ seed }
    return header + Data(body)
  }

  static func isValid(_ bytes: Data) -> Bool {
    guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) else { return false }
    let header = bytes[..<(newline + 1)]
    let seed = UInt8(truncatingIfNeeded: header.reduce(0) { $0 &+ Int($1) })
    return bytes[(newline + 1)...].enumerated().allSatisfy {
      $0.element == UInt8(truncatingIfNeeded: $0.offset &* 31) &+ seed
    }
  }
}

/// The server's blob store, with each failure written to standard error as it happens: a soak whose
/// transfers stall shows why in the client's log (the device itself only retries).
struct FailureLoggingBlobStore<Base: BlobStore>: BlobStore {
  let user: UserID
  let base: Base

  func partialLength(_ key: BlobKey) async throws(BlobStoreError) -> Int {
    try await logged("partialLength \(key)") { () async throws(BlobStoreError) in try await base.partialLength(key) }
  }

  func append(_ bytes: Data, to key: BlobKey, at offset: Int) async throws(BlobStoreError) {
    try await logged("append \(bytes.count) bytes to \(key) at \(offset)") { () async throws(BlobStoreError) in
      try await base.append(bytes, to: key, at: offset)
    }
  }

  func complete(_ key: BlobKey, at time: Timestamp) async throws(BlobStoreError) {
    try await logged("complete \(key)") { () async throws(BlobStoreError) in try await base.complete(key, at: time) }
  }

  /// Not logged: an upload asks first whether its blob is complete, and that fails until it is.
  func size(of key: BlobKey) async throws(BlobStoreError) -> Int {
    try await base.size(of: key)
  }

  func read(_ key: BlobKey, offset: Int, length: Int) async throws(BlobStoreError) -> Data {
    try await logged("read \(length) bytes of \(key) at \(offset)") { () async throws(BlobStoreError) in
      try await base.read(key, offset: offset, length: length)
    }
  }

  func delete(_ key: BlobKey) async throws(BlobStoreError) {
    try await logged("delete \(key)") { () async throws(BlobStoreError) in try await base.delete(key) }
  }

  func list() async throws(BlobStoreError) -> [BlobInfo] {
    try await logged("list") { () async throws(BlobStoreError) in try await base.list() }
  }

  private func logged<Value>(
    _ operation: String,
    _ body: () async throws(BlobStoreError) -> Value
  ) async throws(BlobStoreError) -> Value {
    do {
      return try await body()
    } catch {
      let line = "\(Date()) \(user): blob \(operation) failed: \(error)\n"
      FileHandle.standardError.write(Data(line.utf8))
      throw error
    }
  }
}

actor VerifiedCount {
  private(set) var value = 0
  func add() { value += 1 }
}

/// The command line, as `swift-argument-parser` reads it.
struct VideoClientArguments: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "video-client",
    abstract: "One user's video device against an event server, for the end-to-end script.",
    discussion: """
      Sends --count recordings to the peer, views what it receives, and exits 0 when all its videos were \
      viewed and --expect received videos were verified; 1 when --timeout passes first.
      """
  )

  @Option(help: "The event server's base URL.")
  var server = "http://127.0.0.1:8080"
  @Option(help: "This device's user.")
  var user: String
  @Option(help: "The user's API key.")
  var key: String
  @Option(help: "Whom to send videos to.")
  var peer: String
  @Option(name: .customLong("state-dir"), help: "Where the engine's record and the videos are kept.")
  var stateDirectory: String
  @Option(help: "Recordings to send.")
  var count = 5
  @Option(help: "Received videos to verify before exiting.")
  var expect = 5
  @Option(help: "Seconds between recordings.")
  var interval = 0.3
  @Option(help: "Seconds before giving up.")
  var timeout = 60.0

  func validate() throws {
    guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https" else {
      throw ValidationError("--server must be an http(s) URL, not '\(server)'")
    }
    for (name, value) in [
      ("count", Double(count)), ("expect", Double(expect)), ("interval", interval), ("timeout", timeout),
    ]
    where !(0...100_000).contains(value) {
      throw ValidationError("--\(name) must be a number from 0 to 100000, not \(value)")
    }
  }
}

/// The command line, checked, as the client uses it.
struct ClientOptions {
  var server: URL
  var user: UserID
  var key: String
  var peer: UserID
  var stateDirectory: URL
  var count: Int
  var expect: Int
  var interval: Duration
  var timeout: Duration

  init(_ arguments: VideoClientArguments) {
    server = URL(string: arguments.server)!  // validate() checked it
    user = UserID(arguments.user)
    key = arguments.key
    peer = UserID(arguments.peer)
    stateDirectory = URL(fileURLWithPath: arguments.stateDirectory)
    count = arguments.count
    expect = arguments.expect
    interval = .milliseconds(Int64(arguments.interval * 1000))
    timeout = .milliseconds(Int64(arguments.timeout * 1000))
  }
}
