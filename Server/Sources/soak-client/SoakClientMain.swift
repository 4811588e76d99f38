import ArgumentParser
import CommandLineTool
import EventProtocol
import Foundation
import SampleApps
import Synchronization
import UpdateMachine

/// `soak-client`: one user's note-board client over HTTP, for the crash soak: it writes `--count` notes to
/// itself through the outbox while the server is killed and restarted, then checks that the server holds
/// each note exactly once, in order, and that its own state equals a fresh snapshot from the server.
@main
struct SoakClientMain {
  static func main() async {
    let arguments = CommandLineTool.parse(SoakClientArguments.self, tool: "soak-client")
    let options = Options(arguments)
    if let probe = WriteRateProbe(arguments) {
      let (line, succeeded) = await Task.detached { await probe.run() }.value
      print(line)
      exit(succeeded ? 0 : 1)
    }
    if let probe = IdleCostProbe(arguments) {
      let (line, succeeded) = await Task.detached { await probe.run() }.value
      print(line)
      exit(succeeded ? 0 : 1)
    }
    if let probe = LagProbe(arguments) {
      let (line, succeeded) = await Task.detached { await probe.run() }.value
      print(line)
      exit(succeeded ? 0 : 1)
    }
    if arguments.app == .checklist {
      let soak = TeamSoak(options: options, teammates: arguments.teammateCredentials)
      let (line, succeeded) = await Task.detached { await soak.run() }.value
      print(line)
      exit(succeeded ? 0 : 1)
    }
    let (line, succeeded) = await Task.detached { await run(options) }.value
    print(line)
    exit(succeeded ? 0 : 1)
  }

  static func run(_ options: Options) async -> (String, Bool) {
    let credentials = HTTPCredentials(user: options.user, apiKey: options.key)
    let transport = URLSessionTransport<NoteSnapshot, NoteEvent, NoteBoard.Command>(
      baseURL: options.server,
      credentials: credentials
    )
    var configuration = UpdateMachineConfiguration()
    configuration.backoff = BackoffPolicy(base: .milliseconds(100), cap: .seconds(1))
    configuration.outboxBackoff = BackoffPolicy(base: .milliseconds(100), cap: .seconds(1))
    let registers = Mutex(0)
    let acknowledged = Mutex(0)
    let machine = UpdateMachine(
      reducer: NotesReducer(user: options.user),
      transport: transport,
      store: FileStore(url: options.stateDirectory.appendingPathComponent("record.json")),
      configuration: configuration,
      log: { event in
        if case .requestSucceeded(_, let kind) = event {
          switch kind {
          case .register: registers.withLock { $0 += 1 }
          case .submit: acknowledged.withLock { $0 += 1 }
          case .poll, .fetch: break
          }
        }
      }
    )
    await machine.start()
    let expected = (1...options.count).map { "\(options.user.rawValue)-\($0)" }
    for text in expected {
      _ = await machine.submit(.post(text, to: [options.user]))
      try? await Task.sleep(for: .milliseconds(options.intervalMilliseconds))
    }
    let deadline = ContinuousClock.now + .seconds(options.timeoutSeconds)
    var converged = false
    while ContinuousClock.now < deadline {
      let snapshot = await machine.snapshot
      if snapshot.pendingMutations.isEmpty, snapshot.freshness.freshness == .live,
        snapshot.confirmedState?.notes.count ?? 0 >= expected.count
      {
        converged = true
        break
      }
      try? await Task.sleep(for: .milliseconds(100))
    }
    let snapshot = await machine.snapshot
    await machine.stop()
    // What the server holds now, from a fresh registration (its queue is deleted again at once). The server
    // may be between a kill and its restart, so the registration is retried for 60 s: a check that
    // could not reach the server says so instead of counting every note as lost.
    let checkStarted = ContinuousClock.now
    var serverNotes: [String]?
    var lastError: TransportError?
    while serverNotes == nil {
      do {
        let registration = try await transport.register(eventTypes: ["note"], lifespan: nil, clientID: nil)
        serverNotes = registration.snapshot.notes
        try? await transport.deleteQueue(registration.queueID)
      } catch {
        lastError = error
        if ContinuousClock.now - checkStarted > .seconds(60) { break }
        try? await Task.sleep(for: .milliseconds(200))
      }
    }
    guard let serverNotes else {
      return (
        "soak-client \(options.user): the server could not be reached to check its notes for 60 s "
          + "(converged \(converged); last error: \(lastError.map { "\($0)" } ?? "none"))", false
      )
    }
    let clientNotes = snapshot.confirmedState?.notes ?? []
    let counts = Dictionary(serverNotes.map { ($0, 1) }, uniquingKeysWith: +)
    let missing = expected.filter { counts[$0] == nil }.count
    let twice = counts.values.filter { $0 > 1 }.count
    let inOrder = serverNotes == expected
    let matches = clientNotes == serverNotes
    let line =
      "soak-client \(options.user): written \(expected.count), acknowledged \(acknowledged.withLock { $0 }), "
      + "on server \(serverNotes.count), lost \(missing), applied twice \(twice), in order \(inOrder), "
      + "client equals server \(matches), converged \(converged), registers \(registers.withLock { $0 }), "
      + "rejected \(snapshot.rejectedMutations.count)"
    return (line, converged && missing == 0 && twice == 0 && inOrder && matches && snapshot.rejectedMutations.isEmpty)
  }
}

/// The command line, as `swift-argument-parser` reads it.
struct SoakClientArguments: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "soak-client",
    abstract: "Writes notes through the engine's outbox while the server is killed, then checks them.",
    discussion: """
      Writes --count notes (USER-1 … USER-N) to USER, one every --interval milliseconds, against an \
      event-server run with --app notes. Exits 0 once every note is applied exactly once and the client \
      converged; prints one result line either way. With --app checklist, adds --count items to the team \
      checklist of USER (event-server --app checklist) instead, each --teammate registering during the \
      writes, and checks every copy against the tables.
      """
  )

  @Option(help: "The event server's base URL.")
  var server = "http://127.0.0.1:8080"
  @Option(help: "The user writing (and reading) the notes.")
  var user = "soak"
  @Option(help: "The user's API key.")
  var key: String
  @Option(name: .customLong("state-dir"), help: "Where the engine's record is kept.")
  var stateDirectory = "soak-state"
  @Option(help: "Notes to write (1 to 1000000).")
  var count = 100
  @Option(help: "Milliseconds between notes (0 to 60000).")
  var interval = 50
  @Option(help: "Seconds before giving up (1 to 86400).")
  var timeout = 120
  @Option(
    name: .customLong("lag-write-server"),
    help: "Measure replication lag instead: write through this node (with --lag-poll-server)."
  )
  var lagWriteServer: String?
  @Option(name: .customLong("lag-poll-server"), help: "The node the lag probe's long-poll parks on.")
  var lagPollServer: String?
  @Option(name: .customLong("lag-samples"), help: "How many writes the lag probe times (1 to 100000).")
  var lagSamples = 200
  @Option(
    name: .customLong("write-rate"),
    help: "Measure one device's write rate instead: offer this many writes a second (1 to 100000)."
  )
  var writeRate: Int?
  @Option(name: .customLong("write-seconds"), help: "How long the write-rate probe offers writes (1 to 600).")
  var writeSeconds = 5
  @Option(
    name: .customLong("idle-seconds"),
    help: "Measure what an idle client costs instead: hold a long-poll this many seconds (1 to 3600)."
  )
  var idleSeconds: Int?
  @Option(
    name: .customLong("idle-cpu-limit"),
    help: "The most processor time the idle probe may use, as a share of its wall time (0 to 1)."
  )
  var idleCPULimit = 0.05
  @Option(help: "The most writes the outbox sends in one request (1 to 32, the server's window).")
  var batch = UpdateMachineConfiguration().maximumMutationsPerRequest
  @Option(
    help: """
      What the soak and the write-rate probe write: notes (to the device's own user; event-server --app notes \
      or notes-memory) or checklist (items of the user's team; event-server --app checklist).
      """
  )
  var app = App.notes
  @Option(
    name: .customLong("teammate"),
    help: """
      USER:KEY of a member of the user's team (--app checklist): the soak registers one at its own point \
      during the writes; the write-rate probe has each listen for the whole run.
      """
  )
  var teammates: [String] = []

  /// Each `--teammate` (checked by ``validate()`` to be `USER:KEY`).
  var teammateCredentials: [HTTPCredentials] {
    teammates.map { teammate in
      let parts = teammate.split(separator: ":", maxSplits: 1).map(String.init)
      return HTTPCredentials(user: UserID(parts[0]), apiKey: parts[1])
    }
  }

  /// What the write-rate probe writes.
  enum App: String, ExpressibleByArgument, CaseIterable {
    case notes
    case checklist
  }

  func validate() throws {
    for (name, value) in [("server", server), ("lag-write-server", lagWriteServer), ("lag-poll-server", lagPollServer)]
    {
      guard let value else { continue }
      guard let url = URL(string: value), url.scheme != nil else {
        throw ValidationError("--\(name) must be a URL, not '\(value)'")
      }
    }
    if (lagWriteServer == nil) != (lagPollServer == nil) {
      throw ValidationError("--lag-write-server and --lag-poll-server go together")
    }
    if let writeRate, !(1...100_000).contains(writeRate) {
      throw ValidationError("--write-rate must be a whole number in 1...100000, not \(writeRate)")
    }
    if !(1...600).contains(writeSeconds) {
      throw ValidationError("--write-seconds must be a whole number in 1...600, not \(writeSeconds)")
    }
    for teammate in teammates where teammate.split(separator: ":", maxSplits: 1).count != 2 {
      throw ValidationError("--teammate must be USER:KEY, not '\(teammate)'")
    }
    if !teammates.isEmpty, app != .checklist {
      throw ValidationError("--teammate goes with --app checklist")
    }
    if app == .checklist, idleSeconds != nil || lagWriteServer != nil {
      throw ValidationError(
        "--app checklist is for the soak and the write-rate probe, not --idle-seconds or the lag probe"
      )
    }
    if !(1...32).contains(batch) {
      throw ValidationError("--batch must be a whole number in 1...32, not \(batch)")
    }
    if let idleSeconds, !(1...3600).contains(idleSeconds) {
      throw ValidationError("--idle-seconds must be a whole number in 1...3600, not \(idleSeconds)")
    }
    if !(0...1).contains(idleCPULimit) {
      throw ValidationError("--idle-cpu-limit must be a number from 0 to 1, not \(idleCPULimit)")
    }
    if !(1...100_000).contains(lagSamples) {
      throw ValidationError("--lag-samples must be a whole number in 1...100000, not \(lagSamples)")
    }
    for (name, value, range) in [
      ("count", count, 1...1_000_000), ("interval", interval, 0...60_000), ("timeout", timeout, 1...86_400),
    ] where !range.contains(value) {
      throw ValidationError("--\(name) must be a whole number in \(range), not \(value)")
    }
  }
}

/// The command line, checked, as the client uses it.
struct Options {
  var server: URL
  var user: UserID
  var key: String
  var stateDirectory: URL
  var count: Int
  var intervalMilliseconds: Int
  var timeoutSeconds: Int

  init(_ arguments: SoakClientArguments) {
    server = URL(string: arguments.server)!  // validate() checked it
    user = UserID(arguments.user)
    key = arguments.key
    stateDirectory = URL(fileURLWithPath: arguments.stateDirectory)
    count = arguments.count
    intervalMilliseconds = arguments.interval
    timeoutSeconds = arguments.timeout
  }
}
