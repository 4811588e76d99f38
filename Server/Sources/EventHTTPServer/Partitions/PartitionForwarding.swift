import AsyncHTTPClient
import EventProtocol
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle

/// Sends a request of a user whose partition another node serves to that node, and answers with its answer:
/// any node of a partitioned cluster serves any client, whatever the balancer in front did.
///
/// Forwarded rather than redirected: a `307` would reach clients that drop `Authorization` on a redirect to
/// another host (Python's `requests`, which Zulip's clients use, does), would make every long-poll two round
/// trips through the balancer, and would show clients the nodes' own addresses. The cost is one more hop
/// inside the cluster for requests the balancer sent to the wrong node (none when it routes by user).
///
/// A forwarded request carries ``forwardedHeader``; a node receiving one for a user it does not serve answers
/// `503` with `Retry-After` (the partition is moving) instead of forwarding again, so a request never loops.
struct PartitionForwarding<Context: RequestContext>: RouterMiddleware {
  /// The header a forwarded request carries.
  static var forwardedHeader: HTTPField.Name { HTTPField.Name("X-Event-Server-Forwarded")! }
  /// The most a forwarded answer may carry (a poll's batch of events is the largest).
  static var maximumAnswerBytes: Int { 64 << 20 }

  /// Who the request is from (no rate limit here: the serving node applies it).
  let authenticator: any Authenticator
  /// Where `user`'s requests are served: here, or the address of the node serving them.
  let placement: @Sendable (UserID) async -> Placement
  /// Where `user`'s polls are served: as `placement`, but at the serving node's lean poll listener when it
  /// has one (a parked poll costs it less there).
  let pollPlacement: @Sendable (UserID) async -> Placement
  let client: HTTPClient
  let limits: RequestLimits
  /// How long a forwarded long-poll may wait: above the longest heartbeat.
  let longPollDeadline: Duration

  /// Where a user's requests are served.
  enum Placement: Sendable {
    case here
    case elsewhere(address: String)
    case unknown
  }

  func handle(
    _ request: Request,
    context: Context,
    next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    let path = request.uri.path
    guard path.hasPrefix("/api/v1/"), path != "/api/v1/server_settings",
      let user = await authenticator.user(authorization: request.headers[.authorization])
    else {
      // Not a user's request, or not an authenticated one: the route answers it (401 for a bad key).
      return try await next(request, context)
    }
    let isEventsRoute = path == "/api/v1/events" && (request.method == .get || request.method == .delete)
    switch await (isEventsRoute ? pollPlacement(user) : placement(user)) {
    case .here:
      return try await next(request, context)
    case .elsewhere(let address) where request.headers[Self.forwardedHeader] == nil:
      RequestGate.currentMark?.set(user)
      return await forward(request, to: address)
    case .elsewhere, .unknown:
      return await HTTPAnswer.run {
        throw EventAPIError.serviceUnavailable(
          "the user's partition is moving between nodes; send again shortly",
          retryAfter: .seconds(1)
        )
      }
    }
  }

  /// The answer of the node at `address` to `request`; `503` with `Retry-After` when it cannot be reached.
  private func forward(_ request: Request, to address: String) async -> Response {
    var request = request
    let body: ByteBuffer?
    do {
      // Mutations, and a chunk of an upload (the blob routes, `PUT`): a body over its limit is answered 413
      // here, as the serving node would.
      switch request.method {
      case .post, .delete: body = try await request.collectBody(upTo: limits.mutationBatchBytes)
      case .put: body = try await request.collectBody(upTo: limits.blobChunkBytes)
      default: body = nil
      }
    } catch {
      return await HTTPAnswer.run { throw error }
    }
    do {
      var outgoing = HTTPClientRequest(url: address + request.uri.description)
      outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
      for field in request.headers where Self.passedOn(field.name) {
        outgoing.headers.add(name: field.name.rawName, value: field.value)
      }
      outgoing.headers.add(name: Self.forwardedHeader.rawName, value: "1")
      if let body { outgoing.body = .bytes(body) }
      let isLongPoll =
        request.method == .get && request.uri.path == "/api/v1/events"
        && request.uri.queryParameters["dont_block"].map { $0.lowercased() == "true" || $0 == "1" } != true
      let deadline = isLongPoll ? longPollDeadline : .seconds(30)
      let exchange: @Sendable () async throws -> (HTTPClientResponse, ByteBuffer) = { [client, outgoing] in
        let answer = try await client.execute(outgoing, deadline: .now() + .nanoseconds(deadline.nanoseconds))
        return (answer, try await answer.body.collect(upTo: Self.maximumAnswerBytes))
      }
      // A parked poll forwarded elsewhere ends when this node is told to stop, as its own parked polls do:
      // otherwise the stop waits for it through the whole grace period (its partitions unserved meanwhile).
      // The client polls again and reaches a node that serves it; a write in flight is left to finish.
      let (answer, body) = isLongPoll ? try await cancelWhenGracefulShutdown(exchange) : try await exchange()
      var headers = HTTPFields()
      for (name, value) in answer.headers {
        guard let field = HTTPField.Name(name), Self.passedBack(field) else { continue }
        headers.append(HTTPField(name: field, value: value))
      }
      return Response(
        status: HTTPResponse.Status(code: Int(answer.status.code)),
        headers: headers,
        body: ResponseBody(byteBuffer: body)
      )
    } catch {
      if Task.isShuttingDownGracefully {
        return await HTTPAnswer.run {
          throw EventAPIError.serviceUnavailable("this node is stopping; send again shortly", retryAfter: .seconds(1))
        }
      }
      HTTPAnswer.logger.warning(
        "a request forwarded to its partition's node failed",
        metadata: ["node": "\(address)", "error": "\(error)"]
      )
      return await HTTPAnswer.run {
        throw EventAPIError.serviceUnavailable(
          "the node serving this user could not be reached; send again shortly",
          retryAfter: .seconds(1)
        )
      }
    }
  }

  /// The request headers the serving node needs (hop-by-hop ones stay here).
  private static func passedOn(_ name: HTTPField.Name) -> Bool {
    [.authorization, .contentType, .accept, .userAgent, .range].contains(name)
  }

  /// The answer headers the client needs.
  private static func passedBack(_ name: HTTPField.Name) -> Bool {
    [.contentType, .retryAfter, .connection, .contentRange, .acceptRanges].contains(name)
  }
}

extension Duration {
  /// The duration in whole nanoseconds (for NIO's `TimeAmount`).
  fileprivate var nanoseconds: Int64 {
    components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
  }
}
