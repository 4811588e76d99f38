import EventProtocol
import EventServer
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import ServiceLifecycle

/// The admin listener's routes, for operators and orchestrators (on 127.0.0.1 by default, separate from the
/// API, so the API's rule "nothing without a key" holds):
///
/// - `GET /healthz`: 200 while the process serves;
/// - `GET /readyz`: 200 while it accepts writes, 503 once its input log failed, while a cluster node rebuilds
///   itself from the log, or while it is shutting down (take it out of the load balancer);
/// - `GET /metrics`: every ``ServerMetrics`` series in Prometheus's text format.
struct AdminRoutes<Application: ServerApplication>: Sendable {
  let server: EventServer<Application, ContinuousClock>
  let metrics: ServerMetrics

  func add<Context: RequestContext>(to router: Router<Context>) {
    router.get("healthz") { _, _ in Self.text(.ok, "ok\n") }
    router.get("readyz") { _, _ in
      if await server.logFailure != nil { return Self.text(.serviceUnavailable, "the input log failed\n") }
      if await server.isShuttingDown { return Self.text(.serviceUnavailable, "shutting down\n") }
      if await server.isRejoiningLog { return Self.text(.serviceUnavailable, "rebuilding from the log\n") }
      return Self.text(.ok, "ready\n")
    }
    router.get("metrics") { _, _ in
      metrics.sample(
        parkedPolls: await server.parkedPollCount,
        queues: await server.queueCount,
        replicationLag: await server.replicationLag,
        logRejoins: await server.logRejoins
      )
      var response = Self.text(.ok, metrics.text())
      response.headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
      return response
    }
  }

  private static func text(_ status: HTTPResponse.Status, _ text: String) -> Response {
    .plainText(status, text)
  }
}

extension Response {
  /// An admin route's answer: `text` as UTF-8 plain text.
  static func plainText(_ status: HTTPResponse.Status, _ text: String) -> Response {
    Response(
      status: status,
      headers: [.contentType: "text/plain; charset=utf-8"],
      body: ResponseBody(byteBuffer: ByteBuffer(string: text))
    )
  }
}

/// Counts every answer of the API by route and status, and logs each refused one (at debug).
struct MetricsMiddleware<Context: RequestContext>: RouterMiddleware {
  let metrics: ServerMetrics

  func handle(
    _ request: Request,
    context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws
    -> Response
  {
    let note = RefusalNote()
    do {
      let response = try await HTTPAnswer.$refusalNote.withValue(note) { try await next(request, context) }
      metrics.requestAnswered(path: request.uri.path, status: response.status.code)
      if let code = note.code { metrics.refused(code: code.wireValue) }
      logIfRefused(request, status: response.status.code, note: note, context: context)
      return response
    } catch let error as any HTTPResponseError {
      metrics.requestAnswered(path: request.uri.path, status: error.status.code)
      logIfRefused(request, status: error.status.code, note: note, context: context)
      throw error
    }
  }

  /// A request refused for what it sent (a 4xx: bad input, no or a wrong key, over its rate) is logged at
  /// debug, with the request's id (`hb.request.id`, in the context's logger), its route, the status and the
  /// API error code with the reason credentials were refused (`TOKEN_EXPIRED`); never its headers or body,
  /// which may hold a credential.
  private func logIfRefused(_ request: Request, status: Int, note: RefusalNote, context: Context) {
    guard (400..<500).contains(status) else { return }
    var metadata: Logger.Metadata = [
      "route": "\(ServerMetrics.route(of: request.uri.path))", "method": "\(request.method)",
      "status": "\(status)", "code": "\(note.code?.wireValue ?? "none")",
    ]
    if let reason = note.reason { metadata["reason"] = "\(reason)" }
    context.logger.debug("request refused", metadata: metadata)
  }
}

extension EventHTTPServerConfiguration {
  /// The admin listener serving `router` on ``adminHost``:``adminPort``, or `nil` without an admin port.
  func adminListener(
    router: Router<BasicRequestContext>,
    logger: Logger,
    onRunning: @escaping @Sendable (Int) async -> Void
  ) -> (any Service)? {
    guard let adminPort else { return nil }
    return Hummingbird.Application(
      router: router,
      configuration: .init(address: .hostname(adminHost, port: adminPort), serverName: "event-server-admin"),
      onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) },
      logger: logger
    )
  }
}
