import AsyncHTTPClient
import EventProtocol
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// The lean poll listener on a node of a partitioned cluster: a poll of a user whose partition this node
/// serves is answered here, as on a single server; another user's is forwarded to the node serving the
/// user's partition, at its lean poll listener when it advertised one (else at its main listener), and its
/// answer passed back. The rules are `PartitionForwarding`'s: only an authenticated request is forwarded, a
/// forwarded request (it says ``forwardedHeader``) is never forwarded again but answered `503` with
/// `Retry-After` (the partition is moving), and so is any request while its user's partition has no known
/// holder.
///
/// A forwarded long-poll waits on a connection of its own to the serving node, relayed on NIO's pipeline
/// (``PollRelay``: no task while it waits); its client going away closes it, and the listener beginning to
/// stop answers each one `503` at once, as the main listener's forwarding does, so that a stop does not wait
/// for polls parked on other nodes.
struct PollForwarding: Sendable {
  /// The header a forwarded request carries (the main listener's).
  static let forwardedHeader = "X-Event-Server-Forwarded"

  /// Where a user's polls are served.
  let placement: @Sendable (UserID) async -> PartitionForwarding<EventRequestContext>.Placement
  let authenticator: any Authenticator
  let client: HTTPClient
  /// How long a forwarded long-poll may wait: above the longest heartbeat.
  let longPollDeadline: Duration
  private let parked = ForwardedLongPolls()

  init(
    placement: @escaping @Sendable (UserID) async -> PartitionForwarding<EventRequestContext>.Placement,
    authenticator: any Authenticator,
    client: HTTPClient,
    longPollDeadline: Duration
  ) {
    self.placement = placement
    self.authenticator = authenticator
    self.client = client
    self.longPollDeadline = longPollDeadline
  }

  /// The lean listener's answers: `local`'s for users served here, forwarded for the others.
  func answers(local: PollAnswers) -> PollAnswers {
    PollAnswers(
      startLongPoll: { request, answer in
        switch await route(request) {
        case .local: return await local.startLongPoll(request, answer)
        case .refused(var refusal):
          refusal.headers[.connection] = "close"
          answer(refusal)
          return nil
        case .forward(let address): return startForwarded(request, to: address, answer: answer)
        }
      },
      poll: { request in
        switch await route(request) {
        case .local: await local.poll(request)
        case .refused(let refusal): refusal
        case .forward(let address): await forward(request, method: .GET, to: address, deadline: .seconds(30))
        }
      },
      delete: { request in
        switch await route(request) {
        case .local: await local.delete(request)
        case .refused(let refusal): refusal
        case .forward(let address): await forward(request, method: .DELETE, to: address, deadline: .seconds(30))
        }
      },
      stopping: { [parked] in
        local.stopping()
        parked.stop()
      }
    )
  }

  private enum Route {
    /// Served here (or refused here: an unauthenticated request is answered `401` by the route).
    case local
    case forward(String)
    case refused(PlainAnswer)
  }

  private func route(_ request: PollRequest) async -> Route {
    guard let user = await authenticator.user(authorization: request.authorization) else { return .local }
    switch await placement(user) {
    case .here:
      return .local
    case .elsewhere(let address) where !request.isForwarded:
      request.mark.set(user)
      return .forward(address)
    case .elsewhere, .unknown:
      return .refused(Self.unavailable("the user's partition is moving between nodes; send again shortly"))
    }
  }

  /// Forwards a long-poll, answering through `answer`: relayed on a connection of its own
  /// (``PollRelay``) to an `http://host:port` address, else in a task of its own through the HTTP client.
  /// - Returns: What ends it when its client goes away.
  private func startForwarded(
    _ request: PollRequest,
    to address: String,
    answer: @escaping @Sendable (PlainAnswer) -> Void
  ) -> @Sendable () -> Void {
    guard let token = parked.reserve() else {
      answer(Self.unavailable("this node is stopping; send again shortly"))
      return {}
    }
    let parked = parked
    let end: @Sendable () -> Void
    if let target = PollRelay.target(of: address) {
      let relay = PollRelay(
        maximumAnswerBytes: PartitionForwarding<EventRequestContext>.maximumAnswerBytes,
        deadline: longPollDeadline
      )
      let connection = relay.start(
        host: target.host,
        port: target.port,
        query: request.query,
        authorization: request.authorization
      ) { result in
        parked.remove(token)
        var plain: PlainAnswer
        switch result {
        case .success(let relayed): plain = relayed
        case .failure(let failure):
          if parked.isStopping {
            plain = Self.unavailable("this node is stopping; send again shortly")
          } else {
            HTTPAnswer.logger.debug(
              "a poll relayed to its partition's node ended without an answer",
              metadata: ["node": "\(address)", "error": "\(failure)"]
            )
            plain = Self.unavailable("the node serving this user could not be reached; send again shortly")
          }
        }
        plain.headers[.connection] = "close"
        answer(plain)
      }
      end = { connection.close() }
    } else {
      let waiting = Task { [self] in
        var plain = await forward(request, method: .GET, to: address, deadline: longPollDeadline)
        plain.headers[.connection] = "close"
        parked.remove(token)
        answer(plain)
      }
      end = { waiting.cancel() }
    }
    parked.attach(end, to: token)
    return {
      parked.remove(token)
      end()
    }
  }

  /// The serving node's answer to `request`; `503` with `Retry-After` when it cannot be reached or this
  /// listener is stopping.
  private func forward(
    _ request: PollRequest,
    method: HTTPMethod,
    to address: String,
    deadline: Duration
  ) async -> PlainAnswer {
    var outgoing = HTTPClientRequest(
      url: address + "/api/v1/events" + (request.query.isEmpty ? "" : "?" + request.query)
    )
    outgoing.method = method
    if let authorization = request.authorization { outgoing.headers.add(name: "Authorization", value: authorization) }
    outgoing.headers.add(name: Self.forwardedHeader, value: "1")
    if method == .DELETE {
      outgoing.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
      outgoing.body = .bytes(ByteBuffer(string: request.form))
    }
    do {
      let answer = try await client.execute(outgoing, deadline: .now() + .nanoseconds(deadline.wholeNanoseconds))
      let body = try await answer.body.collect(upTo: PartitionForwarding<EventRequestContext>.maximumAnswerBytes)
      return Self.passedBack(status: answer.status, headers: answer.headers, body: body)
    } catch {
      if parked.isStopping { return Self.unavailable("this node is stopping; send again shortly") }
      if !(error is CancellationError) {
        HTTPAnswer.logger.warning(
          "a poll forwarded to its partition's node failed",
          metadata: ["node": "\(address)", "error": "\(error)"]
        )
      }
      return Self.unavailable("the node serving this user could not be reached; send again shortly")
    }
  }

  /// The serving node's answer as this node gives it: its status and body, and of its headers those the
  /// client needs (the rest are the hop's own).
  static func passedBack(status: HTTPResponseStatus, headers: HTTPHeaders, body: ByteBuffer) -> PlainAnswer {
    var fields = HTTPFields()
    for (name, value) in headers {
      guard let field = HTTPField.Name(name), [.contentType, .retryAfter].contains(field) else { continue }
      fields.append(HTTPField(name: field, value: value))
    }
    return PlainAnswer(
      status: HTTPResponse.Status(code: Int(status.code)),
      headers: fields,
      body: Data(body.readableBytesView)
    )
  }

  private static func unavailable(_ message: String) -> PlainAnswer {
    HTTPAnswer.plainFailure(.serviceUnavailable(message, retryAfter: .seconds(1)), status: .serviceUnavailable)
  }
}

/// The forwarded long-polls waiting on other nodes, so that a stopping listener ends them at once.
final class ForwardedLongPolls: Sendable {
  private struct State {
    /// What ends each poll waiting, by token; `nil` for one not started yet.
    var ends: [Int: (@Sendable () -> Void)?] = [:]
    var next = 0
    var isStopping = false
  }

  private let state = Mutex(State())

  /// Whether the listener began to stop.
  var isStopping: Bool { state.withLock { $0.isStopping } }

  /// A token for a poll about to be forwarded; `nil` once the listener is stopping.
  func reserve() -> Int? {
    state.withLock { state in
      guard !state.isStopping else { return nil }
      state.next += 1
      state.ends[state.next] = .some(nil)
      return state.next
    }
  }

  /// Attaches what ends the poll of `token`: called at once if the listener began to stop meanwhile;
  /// forgotten if the poll ended already.
  func attach(_ end: @escaping @Sendable () -> Void, to token: Int) {
    let endNow = state.withLock { state -> Bool in
      if state.isStopping { return true }
      if state.ends[token] != nil { state.ends[token] = .some(end) }
      return false
    }
    if endNow { end() }
  }

  /// Forgets a poll (answered, or its client went away).
  func remove(_ token: Int) {
    _ = state.withLock { $0.ends.removeValue(forKey: token) }
  }

  /// Ends every waiting poll: each answers `503` (send again).
  func stop() {
    let ends = state.withLock { state in
      state.isStopping = true
      defer { state.ends = [:] }
      return state.ends.values.compactMap { $0 }
    }
    for end in ends { end() }
  }
}
