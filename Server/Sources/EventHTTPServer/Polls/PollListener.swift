import EventProtocol
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Synchronization

/// One request of the lean listener, as its answers read it.
struct PollRequest: Sendable {
  /// The `Authorization` header.
  var authorization: String?
  /// The query string.
  var query: String
  /// The form body (a `DELETE`'s).
  var form: String
  /// Whether another node of a partitioned cluster forwarded it (it says `X-Event-Server-Forwarded`): such a
  /// request is answered here or refused, never forwarded again.
  var isForwarded: Bool
  /// Hears of the admission (the connection becomes the user's).
  var mark: AuthenticationMark
}

/// The answers the lean listener gives: from the same code as the Hummingbird routes (``EventRoutes``) on a
/// single server (``serving(_:)``), and forwarded to the partition's node on a partitioned one
/// (`PollForwarding`).
struct PollAnswers: Sendable {
  /// A long-poll: the answer comes through the callback (called once), and the result ends the poll (its
  /// client went away); `nil` when it was answered already.
  var startLongPoll:
    @Sendable (_ request: PollRequest, _ answer: @escaping @Sendable (PlainAnswer) -> Void) async -> (
      @Sendable () -> Void
    )?
  /// `GET /api/v1/events` with `dont_block`.
  var poll: @Sendable (PollRequest) async -> PlainAnswer
  /// `DELETE /api/v1/events`.
  var delete: @Sendable (PollRequest) async -> PlainAnswer
  /// Called once when the listener begins to stop, before it drains its connections.
  var stopping: @Sendable () -> Void = {}

  /// The answers of the event server (or partition nodes) that `routes` reach.
  static func serving<Application, C>(_ routes: EventRoutes<Application, C>) -> PollAnswers
  where C.Duration == Duration, Application.Command: Codable & Equatable {
    PollAnswers(
      startLongPoll: { request, answer in
        await routes.startLongPoll(
          authorization: request.authorization,
          query: request.query,
          mark: request.mark,
          answer: answer
        )
      },
      poll: { await routes.pollAnswer(authorization: $0.authorization, query: $0.query, mark: $0.mark) },
      delete: {
        await routes.deleteAnswer(authorization: $0.authorization, query: $0.query, form: $0.form, mark: $0.mark)
      }
    )
  }
}

/// The events route (`GET` and `DELETE /api/v1/events`) on a listener of its own, below Hummingbird: NIO's
/// HTTP/1.1 pipeline and one handler per connection, which answers each request from a Swift task calling the
/// event server and writes the answer on the connection's event loop. A long-poll parks in the event server
/// as a callback (``EventServer/startPoll(queueID:user:lastEventID:dontBlock:limit:answer:)``), so its task
/// ends once it is parked.
///
/// A parked poll costs its connection's NIO state and the callback (well under Hummingbird route's 45 KB),
/// and a short poll a fraction of the CPU (`docs/performance.md`, "The lean poll listener"). Everything else a request meets is the same as on the main listener: the same
/// authentication and rate limit (the ``RequestGate``), the same connection caps (the ``ConnectionGuard``,
/// shared with the main listener), the same answers and metrics. Other paths are refused with `404`, other
/// methods with `405`.
///
/// At shutdown it stops accepting, asks each connection to close once its answer is written (an idle one
/// closes at once; parked polls are answered by the event server's shutdown), and returns when none is left,
/// or closes the rest when the shutdown's grace runs out.
struct PollListener: Service {
  var host: String
  var port: Int
  var answers: PollAnswers
  var connections: ConnectionGuard
  var metrics: ServerMetrics?
  var idleTimeout: Duration
  var formBytes: Int
  var logger: Logger
  var onRunning: @Sendable (Int) async -> Void

  func run() async throws {
    let open = OpenPollConnections()
    let settings = PollConnectionHandler.Settings(
      answers: answers,
      connections: connections,
      metrics: metrics,
      formBytes: formBytes,
      open: open
    )
    let idle = TimeAmount.nanoseconds(idleTimeout.wholeNanoseconds)
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
      .serverChannelOption(.backlog, value: 256)
      .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
      // A poll's request is a few hundred bytes: a connection's receive buffer starts at 512 B instead of
      // NIO's 2 KB (it grows for larger reads), and a parked poll keeps that much less.
      .childChannelOption(
        .recvAllocator,
        value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65_536)
      )
      .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
          try channel.pipeline.syncOperations.addHandler(ConnectionGuardHandler(connections: connections))
          try channel.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: idle))
          try channel.pipeline.syncOperations.addHandler(PollConnectionHandler(settings))
        }
      }
      .bind(host: host, port: port).get()
    logger.info(
      "the lean poll listener is listening",
      metadata: ["address": "\(host):\(channel.localAddress?.port ?? port)"]
    )
    await onRunning(channel.localAddress?.port ?? 0)
    try? await gracefulShutdown()
    try? await channel.close()
    answers.stopping()
    await withTaskCancellationHandler {
      await open.drain()
    } onCancel: {
      open.closeAll()
    }
  }
}

/// The lean listener's open connections, so that a shutdown can drain them.
final class OpenPollConnections: Sendable {
  private struct State {
    var channels: [ObjectIdentifier: any Channel] = [:]
    var isDraining = false
    var emptyWaiters: [CheckedContinuation<Void, Never>] = []
  }

  private let state = Mutex(State())

  /// A connection opened; `false` once the listener drains (the connection is to close at once).
  func opened(_ channel: any Channel) -> Bool {
    state.withLock { state in
      guard !state.isDraining else { return false }
      state.channels[ObjectIdentifier(channel)] = channel
      return true
    }
  }

  /// A connection closed.
  func closed(_ channel: any Channel) {
    let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
      state.channels[ObjectIdentifier(channel)] = nil
      guard state.isDraining, state.channels.isEmpty else { return [] }
      defer { state.emptyWaiters = [] }
      return state.emptyWaiters
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Asks every connection to close once its answer is written, and returns when none is open.
  func drain() async {
    let channels = state.withLock { state in
      state.isDraining = true
      return Array(state.channels.values)
    }
    for channel in channels { channel.pipeline.fireUserInboundEventTriggered(PollConnectionHandler.Drain()) }
    await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
      let empty = state.withLock { state in
        if state.channels.isEmpty { return true }
        state.emptyWaiters.append(waiter)
        return false
      }
      if empty { waiter.resume() }
    }
  }

  /// Closes every connection now (the shutdown's grace ran out).
  func closeAll() {
    let channels = state.withLock { Array($0.channels.values) }
    for channel in channels { channel.close(promise: nil) }
  }
}
