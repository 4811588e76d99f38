import ArgumentParser
import CommandLineTool
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// `edge-probe`: the floor of the HTTP edge. A bare SwiftNIO HTTP/1.1 server that answers the events API's
/// shapes with fixed bodies: a registration, a `dont_block` poll (empty), and a long-poll parked on its
/// connection until the heartbeat. No authentication, no event server, no actor, no task per request: what a
/// parked long-poll and a short poll cost at the least on this machine with NIO's own HTTP/1.1 pipeline, to
/// compare with Hummingbird's (`scripts/edge-probe.sh` runs `event-server-load` against both; figures in
/// docs/performance.md). With `--in-tasks`, each request goes through an actor in a Swift task and a
/// long-poll waits as a task on the actor's continuation: what a lean route calling the event server's
/// actor would add. Listens on 127.0.0.1 only.
@main
struct EdgeProbeMain {
  static func main() async {
    let arguments = CommandLineTool.parse(EdgeProbeArguments.self, tool: "edge-probe")
    let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
    let heartbeat = TimeAmount.milliseconds(Int64(arguments.heartbeat * 1000))
    let parking = ParkedTasks()
    do {
      let channel = try await ServerBootstrap(group: group)
        .serverChannelOption(.backlog, value: 4096)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelInitializer { channel in
          channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.configureHTTPServerPipeline()
            try channel.pipeline.syncOperations.addHandler(
              EdgeHandler(heartbeat: heartbeat, parking: arguments.inTasks ? parking : nil)
            )
          }
        }
        .bind(host: "127.0.0.1", port: arguments.port).get()
      let line = "edge-probe listening on http://127.0.0.1:\(channel.localAddress?.port ?? 0) (pid \(getpid()))\n"
      FileHandle.standardOutput.write(Data(line.utf8))
      try await Task.sleep(for: .seconds(arguments.seconds))
      try await channel.close()
    } catch {
      FileHandle.standardError.write(Data("edge-probe: \(error)\n".utf8))
      exit(1)
    }
    try? await group.shutdownGracefully()
  }
}

struct EdgeProbeArguments: ParsableArguments {
  @Option(help: "The port on 127.0.0.1 (0 picks one and prints it).")
  var port = 0
  @Option(help: "Seconds a parked long-poll waits before it is answered empty.")
  var heartbeat = 50.0
  @Option(help: "Seconds the probe runs before it stops on its own.")
  var seconds = 600
  @Flag(
    help: """
      Answer every request from a Swift task that passes through an actor, and park each long-poll as a task \
      waiting on a continuation the actor holds, as a route calling the event server's actor would.
      """
  )
  var inTasks = false

  func validate() throws {
    guard (0...65535).contains(port) else { throw ValidationError("--port must be in 0...65535, not \(port)") }
    guard (0.1...3600).contains(heartbeat) else { throw ValidationError("--heartbeat must be in 0.1...3600") }
    guard (1...86_400).contains(seconds) else { throw ValidationError("--seconds must be in 1...86400") }
  }
}

/// One connection's requests: answered at once, or the long-poll parked until the heartbeat. Runs on the
/// connection's event loop only (NIO's handler contract), holding at most one parked poll.
final class EdgeHandler: ChannelInboundHandler, RemovableChannelHandler {
  typealias InboundIn = HTTPServerRequestPart
  typealias OutboundOut = HTTPServerResponsePart

  private let heartbeat: TimeAmount
  /// Where requests go through an actor, and long-polls wait as tasks (`--in-tasks`); `nil`: on the loop.
  private let parking: ParkedTasks?
  private var head: HTTPRequestHead?
  private var parked: Scheduled<Void>?
  private static let registered = ByteBuffer(
    string: #"{"result":"success","msg":"","queue_id":"q1","last_event_id":-1,"queue_lifespan_secs":600}"#
  )
  private static let empty = ByteBuffer(string: #"{"result":"success","msg":"","events":[],"queue_id":"q1"}"#)

  init(heartbeat: TimeAmount, parking: ParkedTasks?) {
    self.heartbeat = heartbeat
    self.parking = parking
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch unwrapInboundIn(data) {
    case .head(let requestHead):
      head = requestHead
    case .body:
      break
    case .end:
      guard let head else { return }
      self.head = nil
      if let parking {
        answerFromTask(head, parking: parking, context: context)
        return
      }
      if head.method == .GET, head.uri.hasPrefix("/api/v1/events"), !head.uri.contains("dont_block=true") {
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        parked = loop.scheduleTask(in: heartbeat) {
          let (handler, context) = bound.value
          handler.parked = nil
          handler.answer(Self.empty, context: context)
        }
      } else {
        answer(head.uri.hasPrefix("/api/v1/register") ? Self.registered : Self.empty, context: context)
      }
    }
  }

  func channelInactive(context: ChannelHandlerContext) {
    parked?.cancel()
    parked = nil
    context.fireChannelInactive()
  }

  /// `--in-tasks`: the request is answered by a task that asks the actor (a long-poll waits there until the
  /// heartbeat wakes it), then hops back to the connection's loop to write.
  private func answerFromTask(_ head: HTTPRequestHead, parking: ParkedTasks, context: ChannelHandlerContext) {
    let loop = context.eventLoop
    let bound = NIOLoopBound((self, context), eventLoop: loop)
    let isLongPoll =
      head.method == .GET && head.uri.hasPrefix("/api/v1/events") && !head.uri.contains("dont_block=true")
    let body = head.uri.hasPrefix("/api/v1/register") ? Self.registered : Self.empty
    let heartbeat = heartbeat
    Task {
      if isLongPoll {
        await parking.park(until: .now + .nanoseconds(heartbeat.nanoseconds))
      } else {
        await parking.pass()
      }
      loop.execute {
        let (handler, context) = bound.value
        handler.answer(body, context: context)
      }
    }
  }

  private func answer(_ body: ByteBuffer, context: ChannelHandlerContext) {
    var headers = HTTPHeaders()
    headers.add(name: "Content-Type", value: "application/json")
    headers.add(name: "Content-Length", value: String(body.readableBytes))
    context.write(
      wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
      promise: nil
    )
    context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
    context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
  }
}

/// `--in-tasks`: an actor that every request passes through, holding each parked long-poll's continuation
/// until its heartbeat (one timer task wakes the due ones every 100 ms), as the event server's actor does.
actor ParkedTasks {
  private var waiting: [(due: ContinuousClock.Instant, continuation: CheckedContinuation<Void, Never>)] = []
  private var timer: Task<Void, Never>?

  /// A short request's hop through the actor.
  func pass() {}

  /// Waits until `due` (or a little after).
  func park(until due: ContinuousClock.Instant) async {
    if timer == nil {
      timer = Task {
        while !Task.isCancelled {
          try? await Task.sleep(for: .milliseconds(100))
          self.wakeDue()
        }
      }
    }
    await withCheckedContinuation { waiting.append((due, $0)) }
  }

  private func wakeDue() {
    let now = ContinuousClock.now
    let due = waiting.filter { $0.due <= now }
    waiting.removeAll { $0.due <= now }
    for entry in due { entry.continuation.resume() }
  }
}
