import EventProtocol
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1

/// One connection of the ``PollListener``: reads each request, answers it from a Swift task, and writes the
/// answer back on the connection's event loop. Runs on that loop only (NIO's handler contract), with at most
/// one request in flight (NIO's pipelining handler holds the next until this one's answer ends).
///
/// A long-poll's answer closes the connection, as on the main listener (a proxy must not reuse it). A
/// long-poll parks in the event server as a callback, its task ended; a connection closing while its poll is
/// parked ends the poll in the event server at once.
final class PollConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
  typealias InboundIn = HTTPServerRequestPart
  typealias OutboundOut = HTTPServerResponsePart

  /// What every connection of one listener shares.
  struct Settings: Sendable {
    var answers: PollAnswers
    var connections: ConnectionGuard
    var metrics: ServerMetrics?
    var formBytes: Int
    var open: OpenPollConnections
  }

  /// Sent by a draining listener: close once the answer under way is written.
  struct Drain {}

  private static let path = "/api/v1/events"

  private let settings: Settings
  private var head: HTTPRequestHead?
  private var body = ByteBuffer()
  private var bodyTooLarge = false
  /// The task answering the request in flight, if any.
  private var answering: Task<Void, Never>?
  /// What ends the parked long-poll in the event server, while one is parked.
  private var endParked: (@Sendable () -> Void)?
  private var isActive = true
  private var isAnswering = false
  private var closesWhenIdle = false

  init(_ settings: Settings) {
    self.settings = settings
  }

  func channelActive(context: ChannelHandlerContext) {
    if !settings.open.opened(context.channel) { context.close(promise: nil) }
    context.fireChannelActive()
  }

  func channelInactive(context: ChannelHandlerContext) {
    isActive = false
    answering?.cancel()
    answering = nil
    endParked?()
    endParked = nil
    settings.open.closed(context.channel)
    context.fireChannelInactive()
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch unwrapInboundIn(data) {
    case .head(let requestHead):
      head = requestHead
      body.clear()
      bodyTooLarge = false
    case .body(var part):
      if body.readableBytes + part.readableBytes > settings.formBytes {
        bodyTooLarge = true
      } else {
        body.writeBuffer(&part)
      }
    case .end:
      guard let head else { return }
      self.head = nil
      answer(head, context: context)
    }
  }

  func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
    switch event {
    case is IdleStateHandler.IdleStateEvent:
      // Silent too long with nothing in flight: a parked poll is in flight, and stays.
      if !isAnswering { context.close(promise: nil) }
    case is Drain:
      closesWhenIdle = true
      if !isAnswering { context.close(promise: nil) }
    default:
      context.fireUserInboundEventTriggered(event)
    }
  }

  private func answer(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
    isAnswering = true
    let parts = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
    let path = String(parts[0])
    let query = parts.count > 1 ? String(parts[1]) : ""
    guard path == Self.path else {
      write(
        refusal(.badRequest("this listener serves \(Self.path) only; send other requests to the main port"), .notFound),
        path: path,
        keepAlive: head.isKeepAlive,
        context: context
      )
      return
    }
    guard head.method == .GET || head.method == .DELETE else {
      var answer = refusal(.badRequest("\(Self.path) takes GET or DELETE"), .methodNotAllowed)
      answer.headers[.allow] = "GET, DELETE"
      write(answer, path: path, keepAlive: head.isKeepAlive, context: context)
      return
    }
    guard !bodyTooLarge else {
      write(refusal(.badRequest(HTTPAnswer.tooLarge), .contentTooLarge), path: path, keepAlive: false, context: context)
      return
    }
    let isPoll = head.method == .GET
    // A long-poll's answer says `Connection: close` (`EventRoutes.pollAnswer`, `startLongPoll`).
    let keepAlive = head.isKeepAlive
    let settings = settings
    let channel = context.channel
    let loop = context.eventLoop
    let bound = NIOLoopBound((self, context), eventLoop: loop)
    let request = PollRequest(
      authorization: head.headers.first(name: "Authorization"),
      query: query,
      form: String(buffer: body),
      isForwarded: head.headers.contains(name: PollForwarding.forwardedHeader),
      mark: AuthenticationMark { [connections = settings.connections] user in
        connections.authenticated(channel, as: user)
      }
    )
    if isPoll && PollQuery.isLongPoll(query: query) {
      answering = Task {
        let end = await settings.answers.startLongPoll(request) { answer in
          if let code = answer.refusal { settings.metrics?.refused(code: code.wireValue) }
          loop.execute {
            let (handler, context) = bound.value
            handler.endParked = nil
            handler.write(answer, path: path, keepAlive: false, context: context)
          }
        }
        loop.execute {
          let (handler, _) = bound.value
          handler.answering = nil
          // Parked still, unless answered already or the client went away meanwhile.
          guard let end else { return }
          if handler.isActive && handler.isAnswering { handler.endParked = end } else { end() }
        }
      }
      return
    }
    answering = Task {
      // No task-local values here (the main listener's middleware sets them): each would add a frame to the
      // task that a parked poll keeps.
      let answer =
        isPoll ? await settings.answers.poll(request) : await settings.answers.delete(request)
      if let code = answer.refusal { settings.metrics?.refused(code: code.wireValue) }
      loop.execute {
        let (handler, context) = bound.value
        handler.answering = nil
        handler.write(answer, path: path, keepAlive: keepAlive, context: context)
      }
    }
  }

  private func refusal(_ error: EventAPIError, _ status: HTTPResponse.Status) -> PlainAnswer {
    settings.metrics?.refused(code: error.code.wireValue)
    return HTTPAnswer.plainFailure(error, status: status)
  }

  private func write(_ answer: PlainAnswer, path: String, keepAlive: Bool, context: ChannelHandlerContext) {
    settings.metrics?.requestAnswered(path: path, status: answer.status.code)
    let staysOpen = keepAlive && !closesWhenIdle && answer.headers[.connection] != "close"
    var headers = HTTPHeaders()
    for field in answer.headers where field.name != .connection {
      headers.add(name: field.name.rawName, value: field.value)
    }
    headers.add(name: "Content-Length", value: String(answer.body.count))
    if !staysOpen { headers.add(name: "Connection", value: "close") }
    let status = HTTPResponseStatus(statusCode: answer.status.code, reasonPhrase: answer.status.reasonPhrase)
    context.write(
      wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))),
      promise: nil
    )
    context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: answer.body)))), promise: nil)
    isAnswering = false
    if staysOpen {
      context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    } else {
      let channel = context.channel
      context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
  }
}
