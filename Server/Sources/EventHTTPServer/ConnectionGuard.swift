import EventProtocol
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// The shell of ``ConnectionTable``: one per server, a ``ConnectionGuardHandler`` in each connection's
/// pipeline, and ``ConnectionAuthenticationMiddleware`` marking connections whose requests authenticated.
final class ConnectionGuard: Sendable {
  private struct State: Sendable {
    var table: ConnectionTable
    var channels: [Int: any Channel] = [:]
    var ids: [ObjectIdentifier: Int] = [:]
    var nextID = 0
  }

  private let state: Mutex<State>
  private let timeout: TimeAmount
  private let logger: Logger

  init(limits: ConnectionLimits, logger: Logger) {
    state = Mutex(State(table: ConnectionTable(limits: limits)))
    timeout = .nanoseconds(Int64(limits.unauthenticatedTimeout / .nanoseconds(1)))
    self.logger = logger
  }

  /// How many connections are open.
  var count: Int { state.withLock { $0.table.count } }

  /// A connection opened: admitted (closing any evicted to make room, and closing this one if it has not
  /// authenticated in time) or closed at once.
  func opened(_ channel: any Channel) -> Int? {
    let peer = channel.remoteAddress?.ipAddress ?? "unknown"
    let (id, decision, evicted): (Int, ConnectionTable.Decision, [any Channel]) = state.withLock { state in
      let id = state.nextID
      state.nextID += 1
      let decision = state.table.opened(id, peer: peer)
      var evicted: [any Channel] = []
      if case .admitted(let ids) = decision {
        evicted = ids.compactMap { state.channels.removeValue(forKey: $0) }
        for channel in evicted { state.ids[ObjectIdentifier(channel)] = nil }
        state.channels[id] = channel
        state.ids[ObjectIdentifier(channel)] = id
      }
      return (id, decision, evicted)
    }
    for channel in evicted { channel.close(promise: nil) }
    guard decision != .refused else {
      logger.debug("connection refused: over the caps", metadata: ["peer": "\(peer)"])
      return nil
    }
    channel.eventLoop.scheduleTask(in: timeout) { [self] in
      if state.withLock({ $0.table.isStillUnauthenticated(id) }) { channel.close(promise: nil) }
    }
    return id
  }

  /// A request on `channel` was admitted for `user`; closes that user's oldest connections past their cap.
  func authenticated(_ channel: any Channel, as user: UserID) {
    let evicted: [any Channel] = state.withLock { state in
      guard let id = state.ids[ObjectIdentifier(channel)] else { return [] }
      let ids = state.table.authenticated(id, as: user)
      let channels = ids.compactMap { state.channels.removeValue(forKey: $0) }
      for channel in channels { state.ids[ObjectIdentifier(channel)] = nil }
      return channels
    }
    for channel in evicted { channel.close(promise: nil) }
  }

  /// The connection closed.
  func closed(_ id: Int) {
    state.withLock { state in
      state.table.closed(id)
      if let channel = state.channels.removeValue(forKey: id) { state.ids[ObjectIdentifier(channel)] = nil }
    }
  }
}

/// Tells the ``ConnectionGuard`` when its connection opens and closes, and closes it when refused.
final class ConnectionGuardHandler: ChannelDuplexHandler, RemovableChannelHandler {
  typealias InboundIn = NIOAny
  typealias OutboundIn = NIOAny

  private let connections: ConnectionGuard
  private var id: Int?
  private var started = false

  init(connections: ConnectionGuard) {
    self.connections = connections
  }

  func handlerAdded(context: ChannelHandlerContext) {
    if context.channel.isActive { start(context) }
  }

  func channelActive(context: ChannelHandlerContext) {
    start(context)
    context.fireChannelActive()
  }

  private func start(_ context: ChannelHandlerContext) {
    guard !started else { return }
    started = true
    id = connections.opened(context.channel)
    if id == nil { context.close(promise: nil) }
  }

  func channelInactive(context: ChannelHandlerContext) {
    if let id { connections.closed(id) }
    id = nil
    context.fireChannelInactive()
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    if let id { connections.closed(id) }
    id = nil
  }
}

/// The request context of an ``EventHTTPServer``: Hummingbird's basic context, and the connection the request
/// came on (for the connection caps).
public struct EventRequestContext: RequestContext {
  public var coreContext: CoreRequestContextStorage
  /// The connection the request came on.
  public let channel: any Channel

  public init(source: ApplicationRequestContextSource) {
    coreContext = .init(source: source)
    channel = source.channel
  }
}

/// Marks a connection authenticated once a request on it passed the ``RequestGate``.
struct ConnectionAuthenticationMiddleware: RouterMiddleware {
  typealias Context = EventRequestContext

  let connections: ConnectionGuard

  func handle(
    _ request: Request,
    context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    // Marked the moment the gate admits the request, not when it is answered: a parked poll holds its
    // connection for up to a minute, and it is an authenticated one. A request refused (401, 429) leaves the
    // connection unauthenticated: evictable for room, and closed when its time is up.
    let channel = context.channel
    let mark = AuthenticationMark { [connections] user in connections.authenticated(channel, as: user) }
    return try await RequestGate.$currentMark.withValue(mark) { try await next(request, context) }
  }
}

/// Told by the ``RequestGate`` when the request it is in is admitted (authenticated and within the rate limit).
final class AuthenticationMark: Sendable {
  private let onAuthenticated: @Sendable (UserID) -> Void

  init(onAuthenticated: @escaping @Sendable (UserID) -> Void) {
    self.onAuthenticated = onAuthenticated
  }

  func set(_ user: UserID) {
    onAuthenticated(user)
  }
}
