import EventProtocol
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A long-poll forwarded to another node's lean poll listener over a connection of its own, on NIO's
/// pipeline alone: while the poll waits, the forwarding node holds that connection's NIO state and this
/// handler, no Swift task and no HTTP client's bookkeeping (which held 33 KB a poll:
/// `scripts/forwarded-polls.sh`, docs/performance.md).
///
/// The request says `Connection: close`: one poll a connection, as a parked poll holds its connection anyway.
/// The answer is read whole (at most ``maximumAnswerBytes``) and handed over once; the connection closing
/// first, an error, or the deadline end it with a failure.
struct PollRelay: Sendable {
  /// The most an answer may carry (a poll's batch of events is the largest).
  let maximumAnswerBytes: Int
  /// How long the poll may wait for its answer: above the longest heartbeat.
  let deadline: Duration

  /// Why a relayed poll ended without an answer.
  struct Failure: Error, CustomStringConvertible {
    var description: String
  }

  /// A relayed poll under way.
  final class Connection: Sendable {
    private let channel: EventLoopFuture<any Channel>

    init(channel: EventLoopFuture<any Channel>) {
      self.channel = channel
    }

    /// Ends the poll (its answer, if not given yet, is a failure).
    func close() {
      channel.whenSuccess { $0.close(promise: nil) }
    }
  }

  /// The host and port of a plain `http://host:port` address, the form nodes advertise; `nil` for others
  /// (those are forwarded with the HTTP client).
  static func target(of address: String) -> (host: String, port: Int)? {
    guard let url = URL(string: address), url.scheme == "http", let host = url.host, let port = url.port,
      url.path.isEmpty || url.path == "/", url.query == nil
    else { return nil }
    return (host, port)
  }

  /// Sends `GET /api/v1/events?query` with `authorization` to `host:port`, marked as forwarded, and calls
  /// `answer` once with the answer or the failure.
  func start(
    host: String,
    port: Int,
    query: String,
    authorization: String?,
    answer: @escaping @Sendable (Result<PlainAnswer, Failure>) -> Void
  ) -> Connection {
    var headers = HTTPHeaders()
    headers.add(name: "Host", value: "\(host):\(port)")
    if let authorization { headers.add(name: "Authorization", value: authorization) }
    headers.add(name: PollForwarding.forwardedHeader, value: "1")
    headers.add(name: "Connection", value: "close")
    let head = HTTPRequestHead(
      version: .http1_1,
      method: .GET,
      uri: "/api/v1/events" + (query.isEmpty ? "" : "?" + query),
      headers: headers
    )
    let once = AnswerOnce(answer)
    let (maximumAnswerBytes, deadline) = (maximumAnswerBytes, deadline)
    let channel = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
      .connectTimeout(.seconds(1))
      .channelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65_536))
      .channelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
          try channel.pipeline.syncOperations.addHTTPClientHandlers()
          try channel.pipeline.syncOperations.addHandler(
            PollRelayHandler(request: head, maximumAnswerBytes: maximumAnswerBytes, deadline: deadline, answer: once)
          )
        }
      }
      .connect(host: host, port: port)
    channel.whenFailure { error in once.give(.failure(Failure(description: "cannot connect: \(error)"))) }
    return Connection(channel: channel)
  }
}

/// Calls its callback once, whoever calls first (the handler, or a failed connect).
private final class AnswerOnce: Sendable {
  private let callback: Mutex<(@Sendable (Result<PlainAnswer, PollRelay.Failure>) -> Void)?>

  init(_ callback: @escaping @Sendable (Result<PlainAnswer, PollRelay.Failure>) -> Void) {
    self.callback = Mutex(callback)
  }

  func give(_ result: Result<PlainAnswer, PollRelay.Failure>) {
    let callback = self.callback.withLock { callback in
      defer { callback = nil }
      return callback
    }
    callback?(result)
  }
}

/// The relayed poll's connection: writes the request once connected, reads the answer whole, then closes.
/// Runs on the connection's event loop only.
private final class PollRelayHandler: ChannelInboundHandler {
  typealias InboundIn = HTTPClientResponsePart
  typealias OutboundOut = HTTPClientRequestPart

  /// The request, until written.
  private var request: HTTPRequestHead?
  private let maximumAnswerBytes: Int
  private let deadline: Duration
  private let answer: AnswerOnce
  private var head: HTTPResponseHead?
  private var body = ByteBuffer()
  private var timeout: Scheduled<Void>?

  init(request: HTTPRequestHead, maximumAnswerBytes: Int, deadline: Duration, answer: AnswerOnce) {
    self.request = request
    self.maximumAnswerBytes = maximumAnswerBytes
    self.deadline = deadline
    self.answer = answer
  }

  func channelActive(context: ChannelHandlerContext) {
    let channel = context.channel
    timeout = context.eventLoop.scheduleTask(in: .nanoseconds(deadline.wholeNanoseconds)) {
      channel.close(promise: nil)
    }
    if let request {
      context.write(wrapOutboundOut(.head(request)), promise: nil)
      context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
      self.request = nil
    }
    context.fireChannelActive()
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch unwrapInboundIn(data) {
    case .head(let responseHead):
      head = responseHead
    case .body(var part):
      guard body.readableBytes + part.readableBytes <= maximumAnswerBytes else {
        finish(.failure(.init(description: "the answer is over \(maximumAnswerBytes) bytes")), context: context)
        return
      }
      body.writeBuffer(&part)
    case .end:
      guard let head else { return }
      finish(
        .success(PollForwarding.passedBack(status: head.status, headers: head.headers, body: body)),
        context: context
      )
    }
  }

  func channelInactive(context: ChannelHandlerContext) {
    timeout?.cancel()
    answer.give(.failure(.init(description: "the connection closed before the answer")))
    context.fireChannelInactive()
  }

  func errorCaught(context: ChannelHandlerContext, error: any Error) {
    finish(.failure(.init(description: "\(error)")), context: context)
  }

  private func finish(_ result: Result<PlainAnswer, PollRelay.Failure>, context: ChannelHandlerContext) {
    timeout?.cancel()
    timeout = nil
    answer.give(result)
    context.close(promise: nil)
  }
}
