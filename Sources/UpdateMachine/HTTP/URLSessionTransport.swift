import EventProtocol
import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The transport to a real event server over HTTP, with `URLSession` (FoundationNetworking on Linux, which
/// ships with the toolchain).
///
/// It speaks the protocol of `docs/protocol.md`: `POST /api/v1/register` (form-encoded, JSON in field values,
/// like Zulip's), `GET /api/v1/events`, `DELETE /api/v1/events` and `POST /api/v1/mutations`, with HTTP basic
/// authentication by a per-user API key, as Zulip does, or a bearer token from a ``CredentialsProvider``
/// that refreshes it. Every outcome maps to a typed `TransportError`:
/// connection failures and timeouts, 5xx, 429 with its `Retry-After`, Zulip error bodies, and bodies that
/// are not JSON (an HTML page from a proxy) as malformed or as server errors, never a crash.
///
/// The machine keeps each request's deadline and cancels it when it passes; the transport also gives every
/// request a timeout of its own (``Configuration``) as a backstop, and runs each as a cancellable data task
/// (see `CancellableDataTask`: `URLSession.data(for:)` can deadlock on Linux under mass cancellation).
///
/// ```swift
/// let transport = URLSessionTransport<VideoSnapshot, VideoEvent, VideoCommand>(
///   baseURL: URL(string: "https://sync.example.com")!,
///   credentials: .init(user: "alice", apiKey: keychain.apiKey)
/// )
/// let machine = UpdateMachine(reducer: VideoReducer(user: "alice"), transport: transport, store: store)
/// ```
public struct URLSessionTransport<
  State: Codable & Sendable & Equatable,
  Event: EventPayload,
  Mutation: Codable & Sendable & Equatable
>: EventTransport {
  /// Who the requests are from.
  public typealias Credentials = HTTPCredentials

  /// Timeouts and limits.
  public struct Configuration: Sendable, Hashable {
    /// The timeout of a register, a non-blocking poll, a mutation or a delete.
    public var requestTimeout: Duration = .seconds(60)
    /// The timeout of a long-poll: above the server's 90 s recommendation, which is above its heartbeat.
    public var longPollTimeout: Duration = .seconds(100)
    /// The largest reply body accepted.
    public var maximumBodySize: Int = WireFormat.maximumBodySize
    /// How many connections to the server may be open at once.
    public var maximumConnections = 8
    /// The largest body of a batch of mutations (1 MiB, `event-server`'s limit): a batch that would be
    /// larger sends the writes that fit (at least one), and the engine sends the rest next.
    public var maximumBatchBytes = 1 << 20

    /// The defaults.
    public init() {}
  }

  /// The server, and who the requests are from.
  public let endpoint: HTTPEndpoint
  /// Timeouts and limits.
  public let configuration: Configuration

  /// Creates a transport with its own ephemeral session (no cache, no cookies), sending a user's API key
  /// that never changes.
  public init(baseURL: URL, credentials: Credentials, configuration: Configuration = .init()) {
    self.init(baseURL: baseURL, credentials: .fixed(credentials), configuration: configuration)
  }

  /// Creates a transport with its own ephemeral session (no cache, no cookies), sending the credentials
  /// `credentials` gives: asked before every request, and to refresh them once after a `401` (the request
  /// is then sent again; refused again, the machine stops with ``StopReason/unauthorized(message:)``).
  public init(baseURL: URL, credentials: CredentialsProvider, configuration: Configuration = .init()) {
    self.endpoint = HTTPEndpoint(
      baseURL: baseURL,
      credentials: credentials,
      maximumConnections: configuration.maximumConnections
    )
    self.configuration = configuration
  }

  // MARK: - EventTransport

  public func register(
    eventTypes: Set<String>?,
    lifespan: Duration?,
    clientID: ClientID?
  ) async throws(TransportError) -> Registration<State> {
    var fields: [(String, String)] = []
    if let eventTypes {
      fields.append(("event_types", Self.jsonArray(eventTypes.sorted())))
    }
    if let lifespan {
      fields.append(("lifespan_secs", String(Int64(lifespan / .seconds(1)))))
    }
    if let clientID { fields.append(("client_id", clientID.rawValue)) }
    let answer = try await endpoint.send(
      "POST",
      path: "api/v1/register",
      headers: ["Content-Type": "application/x-www-form-urlencoded"],
      body: Data(HTTPForm.encode(fields).utf8),
      timeout: configuration.requestTimeout
    )
    return try decode(Registration<State>.self, answer)
  }

  public func poll(
    after finger: EventFinger,
    dontBlock: Bool,
    limit: Int?
  ) async throws(TransportError) -> [EventEnvelope<Event>] {
    var query = [
      URLQueryItem(name: "queue_id", value: finger.queueID.rawValue),
      URLQueryItem(name: "last_event_id", value: String(finger.lastEventID)),
      URLQueryItem(name: "dont_block", value: dontBlock ? "true" : "false"),
    ]
    if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
    let timeout = dontBlock ? configuration.requestTimeout : configuration.longPollTimeout
    let answer = try await endpoint.send("GET", path: "api/v1/events", query: query, timeout: timeout)
    return try decode(EventsReply<Event>.self, answer).events
  }

  public func submit(
    _ mutation: MutationRequest<Mutation>,
    queueID: QueueID?
  ) async throws(TransportError) -> MutationReceipt {
    let body: Data
    do {
      body = try WireFormat.encode(mutation)
    } catch {
      throw .api(.badRequest("the mutation does not encode: \(error)"))
    }
    let answer = try await endpoint.send(
      "POST",
      path: "api/v1/mutations",
      headers: ["Content-Type": "application/json"],
      body: body,
      timeout: configuration.requestTimeout
    )
    return try decode(MutationReceipt.self, answer)
  }

  /// Sends several writes in one request (`POST /api/v1/mutation_batches`): as many of `batch`'s, in order,
  /// as fit in ``Configuration/maximumBatchBytes`` (at least one). A server without the batch route (`404`,
  /// `405`: a Zulip server, an older `event-server`) gets the writes one at a time from then on.
  public func submit(
    _ batch: MutationBatch<Mutation>,
    queueID: QueueID?
  ) async throws(TransportError) -> [MutationOutcome] {
    guard let first = batch.requests.first else { throw .api(.badRequest("a batch holds at least one mutation")) }
    if batch.requests.count == 1 || !endpoint.supportsBatches {
      return [try await submitAlone(first, queueID: queueID)]
    }
    let body: Data
    do {
      body = try Self.batchBody(batch.requests, limit: configuration.maximumBatchBytes).body
    } catch {
      throw .api(.badRequest("the mutation does not encode: \(error)"))
    }
    let answer = try await endpoint.send(
      "POST",
      path: "api/v1/mutation_batches",
      headers: ["Content-Type": "application/json"],
      body: body,
      timeout: configuration.requestTimeout
    )
    if answer.status == 404 || answer.status == 405 {
      endpoint.supportsBatches = false
      return [try await submitAlone(first, queueID: queueID)]
    }
    return try decode(MutationBatchReply.self, answer).outcomes
  }

  /// The body of a batch: as many of `requests`, in order, as fit in `limit` bytes (at least one).
  /// - Returns: The body and how many writes it holds.
  /// - Throws: When the first write does not encode (a later one that does not is left for later).
  static func batchBody(_ requests: [MutationRequest<Mutation>], limit: Int) throws -> (body: Data, count: Int) {
    var body = Data(#"{"mutations":["#.utf8)
    var count = 0
    for request in requests {
      let encoded: Data
      do {
        encoded = try WireFormat.encode(request)
      } catch {
        if count == 0 { throw error }
        break
      }
      if count > 0 && body.count + encoded.count + 3 > limit { break }
      if count > 0 { body.append(UInt8(ascii: ",")) }
      body.append(encoded)
      count += 1
    }
    body.append(contentsOf: "]}".utf8)
    return (body, count)
  }

  /// Fetches a page of partial state (`GET /api/v1/fetch`): the narrow as Zulip's JSON array of terms, the
  /// anchor, `num_before` and `num_after`, read against `queue_id`.
  public func fetch<Item: Codable & Sendable & Equatable>(
    _ request: FetchRequest,
    queueID: QueueID,
    as itemType: Item.Type
  ) async throws(TransportError) -> FetchAnswer<Item> {
    let narrow: String
    do {
      narrow = String(decoding: try JSONEncoder().encode(request.narrow), as: UTF8.self)
    } catch {
      throw .api(.badRequest("the narrow does not encode: \(error)"))
    }
    let query = [
      URLQueryItem(name: "queue_id", value: queueID.rawValue),
      URLQueryItem(name: "narrow", value: narrow),
      URLQueryItem(name: "anchor", value: request.anchor.description),
      URLQueryItem(name: "num_before", value: String(request.before)),
      URLQueryItem(name: "num_after", value: String(request.after)),
    ]
    let answer = try await endpoint.send(
      "GET",
      path: "api/v1/fetch",
      query: query,
      timeout: configuration.requestTimeout
    )
    return try decode(FetchAnswer<Item>.self, answer)
  }

  /// Deletes one of the user's queues (`DELETE /api/v1/events`), as an app does when it signs out.
  /// - Throws: `TransportError`; `BAD_EVENT_QUEUE_ID` when the queue is already gone.
  public func deleteQueue(_ queueID: QueueID) async throws(TransportError) {
    let query = [URLQueryItem(name: "queue_id", value: queueID.rawValue)]
    let answer = try await endpoint.send(
      "DELETE",
      path: "api/v1/events",
      query: query,
      timeout: configuration.requestTimeout
    )
    _ = try decode(EmptyReply.self, answer)
  }

  /// Registers this installation's platform push token (`POST /api/v1/push_tokens`): the server pushes to it
  /// when events are queued for the user while this installation is not long-polling. `platform` says
  /// which push service issued the token (APNs on Apple's systems, FCM on Android); without it the server
  /// uses its default sender.
  public func registerPushToken(
    _ token: PushToken,
    platform: PushPlatform? = nil,
    clientID: ClientID
  ) async throws(TransportError) {
    var fields = [("token", token.rawValue), ("client_id", clientID.rawValue)]
    if let platform { fields.append(("platform", platform.rawValue)) }
    let answer = try await endpoint.send(
      "POST",
      path: "api/v1/push_tokens",
      headers: ["Content-Type": "application/x-www-form-urlencoded"],
      body: Data(HTTPForm.encode(fields).utf8),
      timeout: configuration.requestTimeout
    )
    _ = try decode(EmptyReply.self, answer)
  }

  private func decode<Reply: Decodable>(
    _ type: Reply.Type,
    _ answer: HTTPEndpoint.Answer
  ) throws(TransportError)
    -> Reply
  {
    try HTTPReply.decode(
      Reply.self,
      status: answer.status,
      retryAfterHeader: answer.headers["retry-after"],
      body: answer.body,
      maximumBodySize: configuration.maximumBodySize
    )
  }

  private static func jsonArray(_ strings: [String]) -> String {
    (try? String(decoding: JSONEncoder().encode(strings), as: UTF8.self)) ?? "[]"
  }
}

/// A success body with nothing in it beyond `result` and `msg`.
private struct EmptyReply: Decodable {}
