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
  static let usage = """
    Usage: video-client --server URL --user USER --key KEY --peer USER --state-dir DIR
                        [--count N] [--expect M] [--interval SECONDS] [--timeout SECONDS]

    Runs one user's video device against an event server: sends N recordings to the peer, views what it
    receives, and exits 0 when all its videos were viewed and M received videos were verified.
    """

  static func main() async {
    let options: ClientOptions
    do {
      options = try ClientOptions(Array(CommandLine.arguments.dropFirst()))
    } catch {
      FileHandle.standardError.write(Data("video-client: \(error) (see --help)\n".utf8))
      exit(2)
    }
    if options.help {
      print(usage)
      return
    }
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
      remoteBlobs: HTTPBlobStore(endpoint: HTTPEndpoint(baseURL: options.server, credentials: credentials)),
      localBlobs: FileBlobStore(directory: options.stateDirectory.appendingPathComponent("blobs")),
      clock: ContinuousClock(),
      configuration: configuration,
      seed: UInt64.random(in: 0...UInt64.max),
      chunkSize: 16 << 10
    )
    let events = await device.events()
    await device.start()
    let deadline = ContinuousClock.now + options.timeout
    let verified = VerifiedCount()
    let viewer = Task {
      for await event in events {
        guard case .delivered(let delivered) = event else { continue }
        let local = FileBlobStore(directory: options.stateDirectory.appendingPathComponent("blobs"))
        let bytes = try? await local.read(delivered.localKey, offset: 0, length: delivered.video.size)
        if let bytes, Recording.isValid(bytes) { await verified.add() }
        await device.markViewed(delivered.video.id)
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
      if outgoingViewed == options.count, await verified.value >= options.expect { break }
      try? await Task.sleep(for: .milliseconds(100))
    }
    viewer.cancel()
    let metrics = await device.machine.snapshot.metrics
    await device.stop()
    let received = await verified.value
    let succeeded = outgoingViewed == options.count && received >= options.expect
    return Outcome(
      summary: "\(options.user): sent \(options.count), viewed by \(options.peer) \(outgoingViewed); "
        + "received and verified \(received) of \(options.expect); registers \(metrics.registers), "
        + "polls \(metrics.polls), failures \(metrics.failures) — \(succeeded ? "converged" : "NOT converged")",
      succeeded: succeeded
    )
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

actor VerifiedCount {
  private(set) var value = 0
  func add() { value += 1 }
}

struct ClientOptions {
  var server = URL(string: "http://127.0.0.1:8080")!
  var user: UserID = ""
  var key = ""
  var peer: UserID = ""
  var stateDirectory = URL(fileURLWithPath: ".")
  var count = 5
  var expect = 5
  var interval: Duration = .milliseconds(300)
  var timeout: Duration = .seconds(60)
  var help = false

  struct Problem: Error, CustomStringConvertible {
    var description: String
  }

  init(_ arguments: [String]) throws {
    var remaining = arguments[...]
    func value(_ name: String) throws -> String {
      guard let value = remaining.popFirst(), !value.hasPrefix("--") else {
        throw Problem(description: "\(name) needs a value")
      }
      return value
    }
    func number(_ name: String) throws -> Double {
      let text = try value(name)
      guard let number = Double(text), number >= 0, number <= 100_000 else {
        throw Problem(description: "\(name) must be a number from 0 to 100000, not '\(text)'")
      }
      return number
    }
    var sawState = false
    while let argument = remaining.popFirst() {
      switch argument {
      case "--help", "-h": help = true
      case "--server":
        let text = try value(argument)
        guard let url = URL(string: text), url.scheme == "http" || url.scheme == "https" else {
          throw Problem(description: "--server must be an http(s) URL, not '\(text)'")
        }
        server = url
      case "--user": user = UserID(try value(argument))
      case "--key": key = try value(argument)
      case "--peer": peer = UserID(try value(argument))
      case "--state-dir":
        stateDirectory = URL(fileURLWithPath: try value(argument))
        sawState = true
      case "--count": count = Int(try number(argument))
      case "--expect": expect = Int(try number(argument))
      case "--interval": interval = .milliseconds(Int64(try number(argument) * 1000))
      case "--timeout": timeout = .milliseconds(Int64(try number(argument) * 1000))
      default: throw Problem(description: "unknown option '\(argument)'")
      }
    }
    if help { return }
    guard !user.rawValue.isEmpty, !key.isEmpty, !peer.rawValue.isEmpty, sawState else {
      throw Problem(description: "--user, --key, --peer and --state-dir are required")
    }
  }
}
