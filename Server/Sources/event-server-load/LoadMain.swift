import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// `event-server-load`: load on an event server over raw HTTP/1.1 connections.
///
/// - `parked`: registers `--users` users (`load-<i>` with key `load-key-<i>`), one connection each, and parks
///   one long-poll per user; then holds them for `--hold` seconds (the caller reads the server's memory
///   meanwhile) and checks none was answered early.
/// - `rate`: `--connections` keep-alive connections send `dont_block` polls back to back for `--seconds`;
///   prints the polls answered per second.
@main
struct LoadMain {
  static let usage = """
    Usage: event-server-load parked --port PORT [--users N] [--hold SECONDS]
           event-server-load rate   --port PORT [--connections C] [--seconds S]

    Drives an event-server on 127.0.0.1 (users load-<i>, keys load-key-<i>: see Server/scripts/load.sh).
    """

  static func main() async {
    let arguments = Array(CommandLine.arguments.dropFirst())
    guard let mode = arguments.first, ["parked", "rate", "--help", "-h"].contains(mode) else {
      FileHandle.standardError.write(
        Data("event-server-load: first argument must be parked or rate (see --help)\n".utf8)
      )
      exit(2)
    }
    if mode == "--help" || mode == "-h" {
      print(usage)
      return
    }
    var options: [String: Int] = ["--users": 5_000, "--hold": 3, "--connections": 8, "--seconds": 5]
    var remaining = arguments.dropFirst()
    while let name = remaining.popFirst() {
      guard ["--port", "--users", "--hold", "--connections", "--seconds"].contains(name) else {
        FileHandle.standardError.write(Data("event-server-load: unknown option '\(name)' (see --help)\n".utf8))
        exit(2)
      }
      guard let text = remaining.popFirst(), let value = Int(text), value >= 0 else {
        FileHandle.standardError.write(Data("event-server-load: \(name) needs a whole number\n".utf8))
        exit(2)
      }
      options[name] = value
    }
    guard let port = options["--port"] else {
      FileHandle.standardError.write(Data("event-server-load: --port is required\n".utf8))
      exit(2)
    }
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
    do {
      if mode == "parked" {
        try await parked(group: group, port: port, users: options["--users"]!, hold: options["--hold"]!)
      } else {
        try await rate(group: group, port: port, connections: options["--connections"]!, seconds: options["--seconds"]!)
      }
    } catch {
      FileHandle.standardError.write(Data("event-server-load: \(error)\n".utf8))
      exit(1)
    }
    try? await group.shutdownGracefully()
  }

  static func parked(group: MultiThreadedEventLoopGroup, port: Int, users: Int, hold: Int) async throws {
    var connections: [Connection] = []
    let answered = AnsweredCount()
    let began = ContinuousClock.now
    for index in 0..<users {
      let connection = try await Connection.open(group: group, port: port)
      let user = "load-\(index)"
      let registered = try await connection.send(
        .post("/api/v1/register", user: user, body: "lifespan_secs=600", type: "application/x-www-form-urlencoded")
      ).get()
      guard registered.status == 200, let queue = registered.field("queue_id") else {
        throw LoadError("register of \(user) answered \(registered.status): \(registered.body.prefix(200))")
      }
      connection.send(.get("/api/v1/events?queue_id=\(queue)&last_event_id=-1", user: user))
        .whenComplete { _ in answered.add() }
      connections.append(connection)
      if (index + 1) % 1_000 == 0 { print("parked \(index + 1) of \(users)") }
    }
    print("parked \(users) long-polls in \(began.duration(to: .now)); holding \(hold) s")
    try await Task.sleep(for: .seconds(hold))
    let early = answered.value
    print("answered early: \(early)")
    for connection in connections { connection.close() }
    if early > 0 { throw LoadError("\(early) parked polls were answered before any event or heartbeat") }
  }

  static func rate(group: MultiThreadedEventLoopGroup, port: Int, connections: Int, seconds: Int) async throws {
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
          var answered = 0
          let poll = Request.get("/api/v1/events?queue_id=\(queue)&last_event_id=-1&dont_block=true", user: user)
          while ContinuousClock.now < deadline {
            let answer = try await connection.send(poll).get()
            guard answer.status == 200 else {
              throw LoadError("poll answered \(answer.status): \(answer.body.prefix(200))")
            }
            answered += 1
          }
          connection.close()
          return answered
        }
      }
      return try await tasks.reduce(into: [Int]()) { $0.append($1) }
    }
    let total = counts.reduce(0, +)
    print(
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
