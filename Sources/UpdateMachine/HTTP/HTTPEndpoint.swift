import EventProtocol
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Who the requests are from: a user and their API key, sent with HTTP basic authentication (as Zulip's
/// API does).
public struct HTTPCredentials: Sendable, Hashable {
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

/// One server over HTTP, as clients of it (``URLSessionTransport``, the video domain's blob store) send
/// requests: an ephemeral `URLSession` with no cache, the credentials its ``CredentialsProvider`` gives
/// (asked before each request, and to refresh them once after a `401`, the request then sent again), a
/// timeout per request, and cancellation that is safe on Linux (see `CancellableDataTask`).
public struct HTTPEndpoint: Sendable {
  /// An answer: its status, its headers (names in lower case) and its body.
  public struct Answer: Sendable {
    /// The HTTP status.
    public var status: Int
    /// The headers, by lower-case name.
    public var headers: [String: String]
    /// The body.
    public var body: Data
  }

  /// The server's address; paths are appended to it.
  public let baseURL: URL
  /// Where the requests' credentials come from.
  public var credentials: CredentialsProvider { source.provider }
  private let source: CredentialSource
  private let session: SessionOwner

  /// An endpoint with its own session, sending the credentials `credentials` gives.
  /// - Parameters:
  ///   - baseURL: The server's address; the API's paths are relative to it.
  ///   - credentials: Asked for the credentials before every request, and to refresh them after a `401`.
  ///   - maximumConnections: How many connections to the server may be open at once (requests beyond wait
  ///     in the session).
  public init(baseURL: URL, credentials: CredentialsProvider, maximumConnections: Int = 8) {
    self.baseURL = baseURL
    self.source = CredentialSource(credentials)
    self.session = SessionOwner(maximumConnections: maximumConnections)
  }

  /// An endpoint with its own session, sending a user's API key that never changes.
  public init(baseURL: URL, credentials: HTTPCredentials, maximumConnections: Int = 8) {
    self.init(baseURL: baseURL, credentials: .fixed(credentials), maximumConnections: maximumConnections)
  }

  /// Whether the server answers `POST /api/v1/mutation_batches`: true until it answers `404` or `405` to
  /// one; shared by the endpoint's copies.
  var supportsBatches: Bool {
    get { session.supportsBatches.withLock { $0 } }
    nonmutating set { session.supportsBatches.withLock { $0 = newValue } }
  }

  /// Sends one request and returns whatever the server answered (any status). A `401` is answered by
  /// asking the provider for fresh credentials and sending the request once more with them (the server
  /// refused it before doing anything); a second `401`, or none fresher, is the answer.
  /// - Throws: `TransportError` when no answer came: connection failed, timed out, or cancelled; the
  ///   provider's failure (``CredentialsUnavailable`` as `UNAUTHORIZED`).
  public func send(
    _ method: String,
    path: String,
    query: [URLQueryItem] = [],
    headers: [String: String] = [:],
    body: Data? = nil,
    timeout: Duration
  ) async throws(TransportError) -> Answer {
    var components = URLComponents(url: baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
    if !query.isEmpty { components.queryItems = query }
    guard let url = components.url else { throw .connectionFailed("not a URL: \(path)") }
    var request = URLRequest(url: url)
    request.httpMethod = method
    request.httpBody = body
    request.timeoutInterval = Double(timeout / .milliseconds(1)) / 1000
    request.cachePolicy = .reloadIgnoringLocalCacheData
    request.setValue("application/json", forHTTPHeaderField: "Accept")
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    let authorization = try await source.current()
    let answer = try await perform(request, authorization: authorization)
    guard answer.status == 401, let fresh = try await source.refreshed(after: authorization) else { return answer }
    return try await perform(request, authorization: fresh)
  }

  /// Sends `request` with `authorization`.
  private func perform(_ request: URLRequest, authorization: HTTPAuthorization) async throws(TransportError) -> Answer {
    var request = request
    request.setValue(authorization.headerValue, forHTTPHeaderField: "Authorization")
    let data: Data
    let response: URLResponse
    do {
      (data, response) = try await CancellableDataTask().run(request, on: session.session, refusing: session.refuser)
    } catch {
      throw Self.transportError(for: error)
    }
    guard let http = response as? HTTPURLResponse else { throw .connectionFailed("not an HTTP response") }
    var fields: [String: String] = [:]
    for (name, value) in http.allHeaderFields {
      if let name = name as? String, let value = value as? String { fields[name.lowercased()] = value }
    }
    return Answer(status: http.statusCode, headers: fields, body: data)
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
}

/// The session an endpoint and its copies share, invalidated when the last copy goes.
private final class SessionOwner: Sendable {
  let session: URLSession
  let refuser = ChallengeRefuser()
  /// Whether the server answers batches of mutations (until it answers `404` to one).
  let supportsBatches = Mutex(true)

  init(maximumConnections: Int) {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.httpCookieStorage = nil
    configuration.urlCredentialStorage = nil
    configuration.httpMaximumConnectionsPerHost = max(maximumConnections, 1)
    session = URLSession(configuration: configuration, delegate: refuser, delegateQueue: nil)
  }

  deinit {
    session.finishTasksAndInvalidate()
  }
}
