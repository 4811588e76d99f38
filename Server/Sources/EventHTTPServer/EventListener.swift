import Hummingbird
import Logging
import NIOCore

extension EventHTTPServerConfiguration {
  /// The router every events listener starts from: metrics, then the connection caps' authentication mark.
  func eventRouter(metrics: ServerMetrics, connections: ConnectionGuard) -> Router<EventRequestContext> {
    let router = Router(context: EventRequestContext.self)
    router.add(middleware: MetricsMiddleware(metrics: metrics))
    router.add(middleware: ConnectionAuthenticationMiddleware(connections: connections))
    return router
  }

  /// The events listener on ``host`` and ``port``: HTTP/1.1 behind the connection guard, closing connections
  /// silent for ``idleTimeout``.
  func eventListener(
    router: Router<EventRequestContext>,
    connections: ConnectionGuard,
    logger: Logger,
    onServerRunning: @escaping @Sendable (any Channel) async -> Void
  ) -> Hummingbird.Application<RouterResponder<EventRequestContext>> {
    Hummingbird.Application(
      router: router,
      server: .http1(
        configuration: .init(
          additionalChannelHandlers: [ConnectionGuardHandler(connections: connections)],
          idleTimeout: .seconds(Int64(idleTimeout / .seconds(1)))
        )
      ),
      configuration: .init(address: .hostname(host, port: port), serverName: "event-server"),
      onServerRunning: onServerRunning,
      logger: logger
    )
  }
}
