import EventProtocol
import EventServer
import Foundation
import Hummingbird
import Logging

/// Limits on what a request may carry.
public struct RequestLimits: Sendable, Hashable {
  /// The largest register or push-token form.
  public var formBytes = 64 << 10
  /// The largest mutation body: a command within the event server's `maximumCommandBytes` (64 KiB) and its
  /// envelope fit; a larger body is `413`.
  public var mutationBytes = 128 << 10
  /// The largest batch of mutations (`POST /api/v1/mutation_batches`, at most `MutationBatch.maximumCount`
  /// mutations, each command within `maximumCommandBytes`); a larger body is `413`.
  public var mutationBatchBytes = 1 << 20
  /// The largest blob chunk in one upload request.
  public var blobChunkBytes = 8 << 20

  /// The defaults.
  public init() {}
}

/// The events API on HTTP (`docs/protocol.md`): each route reads its fields, calls the `EventServer` actor
/// and writes its answer. Decisions live in the server, the gate and the limiter, not here.
public struct EventRoutes<Application: ServerApplication, C: Clock>: Sendable
where C.Duration == Duration, Application.Command: Codable & Equatable {
  /// The event server that serves a user: the one server, or the node serving the user's partition.
  let node: @Sendable (UserID) async throws(EventAPIError) -> EventServer<Application, C>
  let gate: RequestGate
  let limits: RequestLimits
  let metrics: ServerMetrics?
  let pushNotificationsEnabled: Bool
  /// Who may write on users' behalf (``ServiceIdentity``): the service route is served only with one.
  let services: RequestGate?

  /// Routes for `server`, behind `gate`; `pushNotificationsEnabled` is what `server_settings` says (whether
  /// the server sends pushes through a platform, not only logs them).
  /// `services` admits the backends that write on users' behalf (the service route is not served
  /// without it).
  public init(
    server: EventServer<Application, C>,
    gate: RequestGate,
    limits: RequestLimits = .init(),
    metrics: ServerMetrics? = nil,
    pushNotificationsEnabled: Bool = false,
    services: RequestGate? = nil
  ) {
    self.init(
      nodes: { _ in server },
      gate: gate,
      limits: limits,
      metrics: metrics,
      pushNotificationsEnabled: pushNotificationsEnabled,
      services: services
    )
  }

  /// Routes for a server of several nodes, each serving some of the users (a partitioned cluster's): `nodes`
  /// answers the node serving a user, or throws (`503` with `Retry-After` while the user's partition moves).
  public init(
    nodes: @escaping @Sendable (UserID) async throws(EventAPIError) -> EventServer<Application, C>,
    gate: RequestGate,
    limits: RequestLimits = .init(),
    metrics: ServerMetrics? = nil,
    pushNotificationsEnabled: Bool = false,
    services: RequestGate? = nil
  ) {
    self.node = nodes
    self.gate = gate
    self.limits = limits
    self.metrics = metrics
    self.pushNotificationsEnabled = pushNotificationsEnabled
    self.services = services
  }

  /// Adds the routes to `router`.
  public func add<Context: RequestContext>(to router: Router<Context>) {
    router.post("api/v1/register") { request, _ in await register(request) }
    router.get("api/v1/events") { request, _ in await events(request) }
    router.delete("api/v1/events") { request, _ in await deleteQueue(request) }
    router.post("api/v1/mutations") { request, _ in await mutation(request) }
    router.post("api/v1/mutation_batches") { request, _ in await mutationBatch(request) }
    router.post("api/v1/push_tokens") { request, _ in await pushToken(request) }
    router.get("api/v1/server_settings") { request, _ in await serverSettings(request) }
    router.get("api/v1/fetch") { request, _ in await fetch(request) }
    router.refuseOtherMethods(on: "api/v1/register", allowing: [.post])
    router.refuseOtherMethods(on: "api/v1/events", allowing: [.get, .delete])
    router.refuseOtherMethods(on: "api/v1/mutations", allowing: [.post])
    router.refuseOtherMethods(on: "api/v1/mutation_batches", allowing: [.post])
    router.refuseOtherMethods(on: "api/v1/push_tokens", allowing: [.post])
    router.refuseOtherMethods(on: "api/v1/server_settings", allowing: [.get])
    router.refuseOtherMethods(on: "api/v1/fetch", allowing: [.get])
    if services != nil {
      router.post("api/v1/service/mutation_batches") { request, context in
        await serviceMutationBatch(request, logger: context.logger)
      }
      router.refuseOtherMethods(on: "api/v1/service/mutation_batches", allowing: [.post])
    }
  }

  private func admit(_ request: Request) async throws(EventAPIError) -> UserID {
    try await gate.admit(authorization: request.headers[.authorization])
  }

  private func register(_ request: Request) async -> Response {
    await HTTPAnswer.run {
      let user = try await admit(request)
      let server = try await node(user)
      var request = request
      let form = try RequestFields(form: String(buffer: try await request.collectBody(upTo: limits.formBytes)))
      try Self.checkNarrow(form.string("narrow"))
      let clientID = form.string("client_id").map(ClientID.init(rawValue:))
      if let clientID, !(1...ClientID.maximumLength).contains(clientID.rawValue.utf8.count) {
        throw EventAPIError.badRequest("client_id must be 1 to \(ClientID.maximumLength) bytes")
      }
      let registration = try await server.register(
        user: user,
        eventTypes: try form.eventTypes("event_types"),
        lifespan: try form.int("lifespan_secs", in: 0...(365 * 24 * 3600)).map { .seconds($0) },
        clientID: clientID
      )
      return try WireFormat.encodeSuccess(registration)
    }
  }

  private func events(_ request: Request) async -> Response {
    let query = request.uri.query ?? ""
    let authorization = request.headers[.authorization]
    var answer: PlainAnswer
    if PollQuery.isLongPoll(query: query) {
      // A client that drops its connection cancels its parked poll at once, not at the next heartbeat.
      // (Hummingbird closes the connection after such an answer; long-polls are one per connection.)
      do {
        answer = try await request.body.consumeWithCancellationOnInboundClose { _ in
          await pollAnswer(authorization: authorization, query: query)
        }
      } catch {
        let (status, apiError) = HTTPAnswer.answer(to: error)
        answer = HTTPAnswer.plainFailure(apiError, status: status)
      }
    } else {
      answer = await pollAnswer(authorization: authorization, query: query)
    }
    return Response(answer)
  }

  private func deleteQueue(_ request: Request) async -> Response {
    var request = request
    let form: String
    do {
      form = String(buffer: try await request.collectBody(upTo: limits.formBytes))
    } catch {
      let (status, apiError) = HTTPAnswer.answer(to: error)
      return HTTPAnswer.failure(apiError, status: status)
    }
    return Response(
      await deleteAnswer(authorization: request.headers[.authorization], query: request.uri.query ?? "", form: form)
    )
  }

  /// A page of partial state, read atomically with the caller's queue (`docs/partial-state.md`): the
  /// narrow is Zulip's JSON array of terms, the anchor `oldest`, `newest` or a position.
  private func fetch(_ request: Request) async -> Response {
    await HTTPAnswer.run {
      let user = try await admit(request)
      let server = try await node(user)
      let query = try RequestFields(
        query: request,
        allowed: ["queue_id", "narrow", "anchor", "num_before", "num_after"]
      )
      let queueID = QueueID(rawValue: try query.required("queue_id"))
      let fetchRequest = FetchRequest(
        narrow: try Self.narrow(query.string("narrow")),
        anchor: try Self.anchor(try query.required("anchor")),
        before: try query.int("num_before", in: 0...FetchRequest.maximumPageSize) ?? 0,
        after: try query.int("num_after", in: 0...FetchRequest.maximumPageSize) ?? 0
      )
      let answer = try await server.fetch(fetchRequest, queueID: queueID, user: user)
      return try WireFormat.encodeSuccess(answer)
    }
  }

  /// The most terms a fetch's narrow may have.
  static var maximumNarrowTerms: Int { 8 }

  static func narrow(_ text: String?) throws(EventAPIError) -> Narrow {
    guard let text, text != "null" else { return Narrow([]) }
    let terms: [NarrowTerm]
    do {
      terms = try JSONDecoder().decode([NarrowTerm].self, from: Data(text.utf8))
    } catch {
      throw .badRequest("narrow must be a JSON array of {\"operator\", \"operand\"} terms")
    }
    guard terms.count <= maximumNarrowTerms else {
      throw .badRequest("narrow may have at most \(maximumNarrowTerms) terms")
    }
    return Narrow(terms)
  }

  static func anchor(_ text: String) throws(EventAPIError) -> FetchAnchor {
    switch text {
    case "oldest": return .oldest
    case "newest": return .newest
    default:
      guard let position = Int(text) else {
        throw .badRequest("anchor must be \"oldest\", \"newest\" or an integer position")
      }
      return .position(position)
    }
  }

  /// What Zulip's clients read before anything else (`zulip.Client` fails without it): the server's name
  /// and version, and what it supports. Served without authentication, as Zulip documents it: it reveals
  /// nothing of any user, and a client with a wrong key then meets `401` on its first real request (a clear
  /// authentication error) instead of failing in its constructor.
  private func serverSettings(_ request: Request) async -> Response {
    await HTTPAnswer.run {
      _ = try RequestFields(query: request, allowed: [])
      return try WireFormat.encodeSuccess(ServerSettings(pushNotificationsEnabled: pushNotificationsEnabled))
    }
  }

  /// Narrows (Zulip's message filters) mean nothing to an application's events: an empty one is accepted,
  /// any other refused, never silently ignored.
  static func checkNarrow(_ text: String?) throws(EventAPIError) {
    guard let text, text != "[]", text != "null" else { return }
    throw .badRequest("narrow is not supported: register without one (or with []) and filter on the client")
  }

  private func mutation(_ request: Request) async -> Response {
    let start = ContinuousClock.now
    defer { metrics?.mutationAnswered(after: ContinuousClock.now - start) }
    return await HTTPAnswer.run {
      let user = try await admit(request)
      let server = try await node(user)
      var request = request
      let body = try await request.collectBody(upTo: limits.mutationBytes)
      let mutation: MutationRequest<Application.Command>
      do {
        mutation = try JSONDecoder().decode(
          MutationRequest<Application.Command>.self,
          from: Data(body.readableBytesView)
        )
      } catch {
        HTTPAnswer.logger.debug("an undecodable mutation", metadata: ["error": "\(error)"])
        throw EventAPIError.badRequest(
          "the mutation is not valid: a JSON object with client_id, mutation_id and this application's mutation"
        )
      }
      guard !ServiceIdentity.isReserved(mutation.clientID) else { throw ServiceIdentity.reservedClientID }
      let receipt = try await server.applyMutation(
        mutation.mutation,
        from: user,
        clientID: mutation.clientID,
        mutationID: mutation.mutationID
      )
      return try WireFormat.encodeSuccess(receipt)
    }
  }

  /// Several writes of one client, applied in order, each at most once, answered together once durable.
  private func mutationBatch(_ request: Request) async -> Response {
    let start = ContinuousClock.now
    defer { metrics?.mutationAnswered(after: ContinuousClock.now - start) }
    return await HTTPAnswer.run {
      let user = try await admit(request)
      let server = try await node(user)
      var request = request
      let body = try await request.collectBody(upTo: limits.mutationBatchBytes)
      let batch = try Self.batch(from: body)
      guard !batch.requests.contains(where: { ServiceIdentity.isReserved($0.clientID) }) else {
        throw ServiceIdentity.reservedClientID
      }
      let outcomes = try await server.applyMutations(batch, from: user)
      return try WireFormat.encodeSuccess(MutationBatchReply(outcomes: outcomes))
    }
  }

  /// A service's writes on the behalf of the user its query names, or as itself without one (a publish: the
  /// application decides whom its events reach) (``ServiceIdentity``): each at most once, under the
  /// service's own client id, answered once durable.
  /// Each is logged at info on `logger` (the request's): the service, the user, the count and the ids.
  private func serviceMutationBatch(_ request: Request, logger: Logger) async -> Response {
    let start = ContinuousClock.now
    defer { metrics?.mutationAnswered(after: ContinuousClock.now - start) }
    return await HTTPAnswer.run {
      guard let services else { throw EventAPIError.unauthorized() }
      let service = try await services.admit(authorization: request.headers[.authorization])
      let query = try RequestFields(query: request, allowed: ["user"])
      let user: UserID
      if let name = query.string("user") {
        guard !name.isEmpty, name.utf8.count <= 255, !ServiceIdentity.isService(UserID(name)) else {
          throw EventAPIError.badRequest("user must name a user (1 to 255 bytes, not a service)")
        }
        user = UserID(name)
      } else {
        user = ServiceIdentity.user(of: service)
      }
      let server = try await node(user)
      var request = request
      let batch = try Self.batch(from: try await request.collectBody(upTo: limits.mutationBatchBytes))
      let clientID = ServiceIdentity.clientID(of: service)
      guard batch.requests.allSatisfy({ $0.clientID == clientID }) else {
        throw EventAPIError.badRequest("a service's writes are made under the client id '\(clientID)'")
      }
      let outcomes = try await server.applyMutations(batch, from: user)
      logger.info(
        "service wrote on a user's behalf",
        metadata: [
          "service": "\(service)", "user": "\(user)", "writes": "\(batch.requests.count)",
          "mutation_ids":
            "\(batch.requests.first?.mutationID.rawValue ?? 0)...\(batch.requests.last?.mutationID.rawValue ?? 0)",
        ]
      )
      return try WireFormat.encodeSuccess(MutationBatchReply(outcomes: outcomes))
    }
  }

  /// A batch of mutations read from its JSON body.
  private static func batch(from body: ByteBuffer) throws(EventAPIError) -> MutationBatch<Application.Command> {
    do {
      return try JSONDecoder().decode(MutationBatch<Application.Command>.self, from: Data(body.readableBytesView))
    } catch {
      HTTPAnswer.logger.debug("an undecodable batch of mutations", metadata: ["error": "\(error)"])
      throw EventAPIError.badRequest(
        "the batch is not valid: a JSON object whose mutations are objects with client_id, mutation_id and this "
          + "application's mutation"
      )
    }
  }

  private func pushToken(_ request: Request) async -> Response {
    await HTTPAnswer.run {
      let user = try await admit(request)
      let server = try await node(user)
      var request = request
      let form = try RequestFields(form: String(buffer: try await request.collectBody(upTo: limits.formBytes)))
      let token = try form.required("token")
      let clientID = try form.required("client_id")
      let platform = try form.choice("platform", as: PushPlatform.self)
      // Bounds (lengths, installations per user) are the server core's: it refuses with BAD_REQUEST.
      try await server.registerPushToken(
        PushToken(rawValue: token),
        platform: platform,
        user: user,
        clientID: ClientID(rawValue: clientID)
      )
      return try WireFormat.encodeSuccess(Empty())
    }
  }
}

/// A success with nothing in it but `result` and `msg`.
struct Empty: Encodable {}

/// The body of `GET /api/v1/server_settings`, in Zulip's field names.
struct ServerSettings: Encodable {
  var zulipVersion = "swift-update-machine event-server"
  var zulipFeatureLevel = 0
  var pushNotificationsEnabled = false
  var requireEmailFormatUsernames = false
  var authenticationMethods = ["api_key": true]

  enum CodingKeys: String, CodingKey {
    case zulipVersion = "zulip_version"
    case zulipFeatureLevel = "zulip_feature_level"
    case pushNotificationsEnabled = "push_notifications_enabled"
    case requireEmailFormatUsernames = "require_email_format_usernames"
    case authenticationMethods = "authentication_methods"
  }
}
