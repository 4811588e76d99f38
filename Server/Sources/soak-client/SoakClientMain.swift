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
  static let usage = """
    Usage: soak-client --server URL --user USER --key KEY --state-dir DIR [--count N] [--interval MS] [--timeout S]

    Writes N notes (USER-1 … USER-N) to USER through the engine's outbox, one every MS milliseconds
    (default 50), against an event-server run with --app notes. Exits 0 once every note is applied exactly
    once and the client converged; prints one result line either way.
    """

  static func main() async {
    let options: Options
    do {
      options = try Options(Array(CommandLine.arguments.dropFirst()))
    } catch {
      FileHandle.standardError.write(Data("soak-client: \(error) (see --help)\n".utf8))
      exit(2)
    }
    if options.help {
      print(usage)
      return
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
          case .poll: break
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
    // What the server holds now, from a fresh registration (its queue is deleted again at once).
    var serverNotes: [String] = []
    if let registration = try? await transport.register(eventTypes: ["note"], lifespan: nil, clientID: nil) {
      serverNotes = registration.snapshot.notes
      try? await transport.deleteQueue(registration.queueID)
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

/// The command line, checked.
struct Options {
  var server = URL(string: "http://127.0.0.1:8080")!
  var user: UserID = "soak"
  var key = ""
  var stateDirectory = URL(fileURLWithPath: "soak-state")
  var count = 100
  var intervalMilliseconds = 50
  var timeoutSeconds = 120
  var help = false

  struct Problem: Error, CustomStringConvertible {
    var description: String
  }

  init(_ arguments: [String]) throws {
    var remaining = arguments[...]
    func value(_ name: String) throws -> String {
      guard let value = remaining.popFirst() else { throw Problem(description: "\(name) needs a value") }
      return value
    }
    func number(_ name: String, in range: ClosedRange<Int>) throws -> Int {
      let text = try value(name)
      guard let number = Int(text), range.contains(number) else {
        throw Problem(description: "\(name) must be a whole number in \(range), not '\(text)'")
      }
      return number
    }
    var sawKey = false
    while let argument = remaining.popFirst() {
      switch argument {
      case "--help", "-h": help = true
      case "--server":
        let text = try value(argument)
        guard let url = URL(string: text), url.scheme != nil else {
          throw Problem(description: "--server must be a URL, not '\(text)'")
        }
        server = url
      case "--user": user = UserID(try value(argument))
      case "--key":
        key = try value(argument)
        sawKey = true
      case "--state-dir": stateDirectory = URL(fileURLWithPath: try value(argument))
      case "--count": count = try number(argument, in: 1...1_000_000)
      case "--interval": intervalMilliseconds = try number(argument, in: 0...60_000)
      case "--timeout": timeoutSeconds = try number(argument, in: 1...86_400)
      default: throw Problem(description: "unknown option '\(argument)'")
      }
    }
    if !help, !sawKey { throw Problem(description: "--key is required") }
  }
}
