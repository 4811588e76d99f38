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
/// authentication by a per-user API key, as Zulip does. Every outcome maps to a typed ``TransportError``:
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
  /// Who the requests are from: a user and their API key, sent with HTTP basic authentication.
  public struct Credentials: Sendable, Hashable {
    /// The user.
    public var user: UserID
    /// The user's API key.
    public var apiKey: String

    /// Creates credentials.
    public init(user: UserID, apiKey: String) {
      self.user = user
      self.apiKey = apiKey
    }
  }

  /// Timeouts and limits.
  public struct Configuration: Sendable, Hashable {
    /// The timeout of a register, a non-blocking poll, a mutation or a delete.
    public var requestTimeout: Duration = .seconds(60)
    /// The timeout of a long-poll: above the server's 90 s recommendation, which is above its heartbeat.
    public var longPollTimeout: Duration = .seconds(100)
    /// The largest reply body accepted.
    public var maximumBodySize: Int = WireFormat.maximumBodySize

    /// The defaults.
    public init() {}
  }

  /// The server's address; the API paths are appended to it.
  public let baseURL: URL
  /// Who the requests are from.
  public let credentials: Credentials
  /// Timeouts and limits.
  public let configuration: Configuration
  private let session: SessionOwner

  /// Creates a transport with its own ephemeral session (no cache, no cookies).
  public init(baseURL: URL, credentials: Credentials, configuration: Configuration = .init()) {
    self.baseURL = baseURL
    self.credentials = credentials
    self.configuration = configuration
    self.session = SessionOwner()
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
    var request = makeRequest("POST", path: "api/v1/register", timeout: configuration.requestTimeout)
    request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
    request.httpBody = Data(HTTPForm.encode(fields).utf8)
    return try await send(request, expecting: Registration<State>.self)
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
    let request = makeRequest("GET", path: "api/v1/events", query: query, timeout: timeout)
    return try await send(request, expecting: EventsReply<Event>.self).events
  }

  public func submit(
    _ mutation: MutationRequest<Mutation>,
    queueID: QueueID?
  ) async throws(TransportError) -> MutationReceipt {
    var request = makeRequest("POST", path: "api/v1/mutations", timeout: configuration.requestTimeout)
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    do {
      request.httpBody = try WireFormat.encode(mutation)
    } catch {
      throw .api(.badRequest("the mutation does not encode: \(error)"))
    }
    return try await send(request, expecting: MutationReceipt.self)
  }

  /// Deletes one of the user's queues (`DELETE /api/v1/events`), as an app does when it signs out.
  /// - Throws: ``TransportError``; `BAD_EVENT_QUEUE_ID` when the queue is already gone.
  public func deleteQueue(_ queueID: QueueID) async throws(TransportError) {
    let query = [URLQueryItem(name: "queue_id", value: queueID.rawValue)]
    let request = makeRequest("DELETE", path: "api/v1/events", query: query, timeout: configuration.requestTimeout)
    _ = try await send(request, expecting: EmptyReply.self)
  }

  // MARK: - Requests

  private func makeRequest(
    _ method: String,
    path: String,
    query: [URLQueryItem] = [],
    timeout: Duration
  )
    -> URLRequest
  {
    var components = URLComponents(url: baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
    if !query.isEmpty { components.queryItems = query }
    var request = URLRequest(url: components.url!)
    request.httpMethod = method
    request.timeoutInterval = Double(timeout / .milliseconds(1)) / 1000
    request.cachePolicy = .reloadIgnoringLocalCacheData
    let basic = Data("\(credentials.user.rawValue):\(credentials.apiKey)".utf8).base64EncodedString()
    request.setValue("Basic \(basic)", forHTTPHeaderField: "Authorization")
    request.setValue("application/json", forHTTPHeaderField: "Accept")
    return request
  }

  private func send<Reply: Decodable>(
    _ request: URLRequest,
    expecting: Reply.Type
  ) async throws(TransportError)
    -> Reply
  {
    let data: Data
    let response: URLResponse
    do {
      (data, response) = try await CancellableDataTask().run(request, on: session.session)
    } catch {
      throw Self.transportError(for: error)
    }
    guard let http = response as? HTTPURLResponse else {
      throw .api(.malformedResponse("not an HTTP response"))
    }
    return try HTTPReply.decode(
      Reply.self,
      status: http.statusCode,
      retryAfterHeader: http.value(forHTTPHeaderField: "Retry-After"),
      body: data,
      maximumBodySize: configuration.maximumBodySize
    )
  }

  /// How a failure to get any answer counts.
  static func transportError(for error: any Error) -> TransportError {
    if error is CancellationError { return .cancelled }
    guard let urlError = error as? URLError else { return .connectionFailed(String(describing: error)) }
    switch urlError.code {
    case .cancelled: return .cancelled
    case .timedOut: return .timedOut
    default: return .connectionFailed("\(urlError.code.rawValue): \(urlError.localizedDescription)")
    }
  }

  private static func jsonArray(_ strings: [String]) -> String {
    (try? String(decoding: JSONEncoder().encode(strings), as: UTF8.self)) ?? "[]"
  }
}

/// A success body with nothing in it beyond `result` and `msg`.
private struct EmptyReply: Decodable {}

/// The session a transport and its copies share, invalidated when the last copy goes.
private final class SessionOwner: Sendable {
  let session: URLSession

  init() {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.httpCookieStorage = nil
    configuration.httpMaximumConnectionsPerHost = 8
    session = URLSession(configuration: configuration)
  }

  deinit {
    session.finishTasksAndInvalidate()
  }
}
