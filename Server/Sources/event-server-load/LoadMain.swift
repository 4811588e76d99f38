import ArgumentParser
import CommandLineTool
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// `event-server-load`: load on an event server over raw HTTP/1.1 connections.
///
/// - `parked`: registers `--users` users (`load-<i>` with key `load-key-<i>`), one connection each, and parks
///   one long-poll per user; then holds them for `--hold` seconds (the caller reads the server's memory
///   meanwhile) and checks none was answered early.
/// - `idle`: the same registrations on their connections, but no poll: the connections stay open, idle,
///   for `--hold` seconds. What `parked` holds beyond this is the parked request itself.
/// - `rate`: `--connections` keep-alive connections send `dont_block` polls back to back for `--seconds`;
///   prints the polls answered per second.
///
/// With `--poll-port`, each user registers on a connection to `--port` that is closed after, and polls on a
/// connection to the lean poll listener (`event-server --poll-port`).
@main
struct LoadMain {
  static func main() async {
    let arguments = CommandLineTool.parse(LoadArguments.self, tool: "event-server-load")
    let port = arguments.port
    let pollPort = arguments.pollPort
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
    do {
      switch arguments.mode {
      case .parked:
        try await parked(group: group, port: port, pollPort: pollPort, users: arguments.users, hold: arguments.hold)
      case .idle:
        try await parked(group: group, port: port, users: arguments.users, hold: arguments.hold, polls: false)
      case .rate:
        try await rate(
          group: group,
          port: port,
          pollPort: pollPort,
          connections: arguments.connections,
          seconds: arguments.seconds
        )
      }
    } catch {
      FileHandle.standardError.write(Data("event-server-load: \(error)\n".utf8))
      exit(1)
    }
    try? await group.shutdownGracefully()
  }

  /// Registers `users` users, one connection each, and (when `polls`) parks a long-poll on each; holds them.
  static func parked(
    group: MultiThreadedEventLoopGroup,
    port: Int,
    pollPort: Int? = nil,
    users: Int,
    hold: Int,
    polls: Bool = true
  ) async throws {
    var connections: [Connection] = []
    let answered = AnsweredCount()
    var began = ContinuousClock.now
    // With the lean listener, every user registers first (on connections closed after), and the caller
    // takes its baseline at the line saying so: the growth from there is the parked polls' alone.
    var queues: [String] = []
    if let pollPort {
      for index in 0..<users {
        let connection = try await Connection.open(group: group, port: port)
        queues.append(try await register(connection, user: "load-\(index)"))
        connection.close()
      }
      say("registered \(users) users; parking on port \(pollPort) in 2 s")
      try await Task.sleep(for: .seconds(2))
      began = .now
    }
    for index in 0..<users {
      let user = "load-\(index)"
      let connection = try await Connection.open(group: group, port: pollPort ?? port)
      let queue = pollPort == nil ? try await register(connection, user: user) : queues[index]
      if polls {
        connection.send(.get("/api/v1/events?queue_id=\(queue)&last_event_id=-1", user: user))
          .whenComplete { _ in answered.add() }
      }
      connections.append(connection)
      if (index + 1) % 1_000 == 0 { say("\(polls ? "parked" : "registered") \(index + 1) of \(users)") }
    }
    let what = polls ? "parked \(users) long-polls" : "registered \(users) users on idle connections"
    say("\(what) in \(began.duration(to: .now)); holding \(hold) s")
    try await Task.sleep(for: .seconds(hold))
    let early = answered.value
    say("answered early: \(early)")
    for connection in connections { connection.close() }
    if early > 0 { throw LoadError("\(early) parked polls were answered before any event or heartbeat") }
  }

  /// Registers `user` on `connection`; returns the queue id.
  static func register(_ connection: Connection, user: String) async throws -> String {
    let registered = try await connection.send(
      .post("/api/v1/register", user: user, body: "lifespan_secs=600", type: "application/x-www-form-urlencoded")
    ).get()
    guard registered.status == 200, let queue = registered.field("queue_id") else {
      throw LoadError("register of \(user) answered \(registered.status): \(registered.body.prefix(200))")
    }
    return queue
  }

  static func rate(
    group: MultiThreadedEventLoopGroup,
    port: Int,
    pollPort: Int?,
    connections: Int,
    seconds: Int
  ) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    let counts = try await withThrowingTaskGroup(of: Int.self) { tasks in
      for index in 0..<connections {
        tasks.addTask {
          let connection = try await Connection.open(group: group, port: port)
          let user = "load-\(index)"
          let registered = try await connection.send(
            .post("/api/v1/register", user: user, body: "", type: "application/x-www-form-urlencoded")
          ).get()
          guard let queue = registered.field("queue_id") else {
            throw LoadError("register answered \(registered.status)")
          }
          var polling = connection
          if let pollPort {
            connection.close()
            polling = try await Connection.open(group: group, port: pollPort)
          }
          var answered = 0
          let poll = Request.get("/api/v1/events?queue_id=\(queue)&last_event_id=-1&dont_block=true", user: user)
          while ContinuousClock.now < deadline {
            let answer = try await polling.send(poll).get()
            guard answer.status == 200 else {
              throw LoadError("poll answered \(answer.status): \(answer.body.prefix(200))")
            }
            answered += 1
          }
          polling.close()
          return answered
        }
      }
      return try await tasks.reduce(into: [Int]()) { $0.append($1) }
    }
    let total = counts.reduce(0, +)
    say(
      "dont_block polls: \(total) in \(seconds) s over \(connections) connections = \(total / max(seconds, 1)) per second"
    )
  }
}

struct LoadError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

/// One HTTP/1.1 request, written by hand.
struct Request {
  var text: String

  static func get(_ path: String, user: String) -> Request {
    Request(text: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: \(auth(user))\r\n\r\n")
  }

  static func post(_ path: String, user: String, body: String, type: String) -> Request {
    Request(
      text: "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: \(auth(user))\r\nContent-Type: \(type)\r\n"
        + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    )
  }

  private static func auth(_ user: String) -> String {
    let key = "load-key-" + user.dropFirst("load-".count)
    return "Basic " + Data("\(user):\(key)".utf8).base64EncodedString()
  }
}

/// An HTTP answer: status and body.
struct HTTPAnswer: Sendable {
  var status: Int
  var body: String

  /// A string field of a JSON object body.
  func field(_ name: String) -> String? {
    guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else { return nil }
    return object[name] as? String
  }
}

/// A connection that sends requests and matches answers to them in order.
final class Connection: Sendable {
  let channel: any Channel
  let collector: NIOLoopBound<AnswerCollector>

  private init(channel: any Channel, collector: NIOLoopBound<AnswerCollector>) {
    self.channel = channel
    self.collector = collector
  }

  static func open(group: MultiThreadedEventLoopGroup, port: Int) async throws -> Connection {
    let channel = try await ClientBootstrap(group: group)
      .channelOption(.socketOption(.so_reuseaddr), value: 1)
      .connect(host: "127.0.0.1", port: port)
      .get()
    let collector = try await channel.eventLoop.submit {
      let collector = AnswerCollector()
      try channel.pipeline.syncOperations.addHandler(collector)
      return NIOLoopBound(collector, eventLoop: channel.eventLoop)
    }.get()
    return Connection(channel: channel, collector: collector)
  }

  func send(_ request: Request) -> EventLoopFuture<HTTPAnswer> {
    channel.eventLoop.flatSubmit { [collector, channel] in
      let promise = channel.eventLoop.makePromise(of: HTTPAnswer.self)
      collector.value.waiting.append(promise)
      channel.writeAndFlush(ByteBuffer(string: request.text), promise: nil)
      return promise.futureResult
    }
  }

  func close() {
    channel.close(promise: nil)
  }
}

/// Collects bytes into answers (headers, then `Content-Length` bytes of body), fulfilling promises in order.
final class AnswerCollector: ChannelInboundHandler {
  typealias InboundIn = ByteBuffer

  var waiting: [EventLoopPromise<HTTPAnswer>] = []
  private var buffer: [UInt8] = []

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    var bytes = unwrapInboundIn(data)
    buffer += bytes.readBytes(length: bytes.readableBytes) ?? []
    while let answer = nextAnswer(), !waiting.isEmpty {
      waiting.removeFirst().succeed(answer)
    }
  }

  func channelInactive(context: ChannelHandlerContext) {
    for promise in waiting { promise.fail(LoadError("connection closed")) }
    waiting = []
  }

  private func nextAnswer() -> HTTPAnswer? {
    let separator: [UInt8] = Array("\r\n\r\n".utf8)
    guard let end = buffer.firstRange(of: separator) else { return nil }
    let head = String(decoding: buffer[..<end.lowerBound], as: UTF8.self)
    let lines = head.split(separator: "\r\n")
    let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
    let length =
      lines.dropFirst().first { $0.lowercased().hasPrefix("content-length:") }
      .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
    guard buffer.count - end.upperBound >= length else { return nil }
    let body = String(decoding: buffer[end.upperBound..<(end.upperBound + length)], as: UTF8.self)
    buffer.removeFirst(end.upperBound + length)
    return HTTPAnswer(status: status, body: body)
  }
}

/// How many parked polls were answered (or failed) so far.
final class AnsweredCount: Sendable {
  private let count = Mutex(0)
  var value: Int { count.withLock { $0 } }
  func add() { count.withLock { $0 += 1 } }
}

/// The command line, as `swift-argument-parser` reads it.
struct LoadArguments: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "event-server-load",
    abstract: "Load on an event-server on 127.0.0.1 over raw HTTP/1.1 connections.",
    discussion: """
      parked: registers --users users (load-<i>, key load-key-<i>: see Server/scripts/load.sh), one \
      connection each, parks one long-poll per user, holds them --hold seconds and checks none was answered \
      early. idle: the same without the polls (the connections held open, idle). rate: --connections \
      keep-alive connections send dont_block polls back to back for --seconds.
      """
  )

  enum Mode: String, ExpressibleByArgument, CaseIterable {
    case parked, idle, rate
  }

  @Argument(help: "parked | idle | rate")
  var mode: Mode
  @Option(help: "The server's port on 127.0.0.1.")
  var port: Int
  @Option(help: "parked, rate: poll on this port of 127.0.0.1 (the lean poll listener), register on --port.")
  var pollPort: Int?
  @Option(help: "parked, idle: users, one connection (and parked poll) each.")
  var users = 5_000
  @Option(help: "parked, idle: seconds to hold the connections.")
  var hold = 3
  @Option(help: "rate: keep-alive connections.")
  var connections = 8
  @Option(help: "rate: seconds to poll.")
  var seconds = 5

  func validate() throws {
    guard (1...65535).contains(port) else { throw ValidationError("--port must be in 1...65535, not \(port)") }
    if let pollPort, !(1...65535).contains(pollPort) {
      throw ValidationError("--poll-port must be in 1...65535, not \(pollPort)")
    }
    for (name, value) in [("users", users), ("hold", hold), ("connections", connections), ("seconds", seconds)]
    where !(0...1_000_000).contains(value) {
      throw ValidationError("--\(name) must be a whole number in 0...1000000, not \(value)")
    }
  }
}

/// Writes `line` to standard output at once, also into a pipe: the scripts act on the lines as they come.
func say(_ line: String) {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
