import AsyncHTTPClient
import EventProtocol
import EventServer
import Foundation
import Logging
import Synchronization

/// Where and how an ``FCMSender`` sends.
public struct FCMConfiguration: Sendable {
  /// Google's FCM server.
  public static let productionServer = "https://fcm.googleapis.com"

  /// The service account.
  public var credentials: FCMCredentials
  /// The server's base URL: ``productionServer``, or a fake in tests.
  public var server: String
  /// Android priority `HIGH` (delivered at once) rather than `NORMAL`.
  public var highPriority: Bool
  /// How long FCM keeps trying a device that is offline.
  public var timeToLive: Duration
  /// The deadline of each request.
  public var requestTimeout: Duration
  /// When to send again.
  public var retry: PushRetryPolicy

  /// A configuration; high priority, kept an hour for offline devices, ten seconds per request.
  public init(
    credentials: FCMCredentials,
    server: String = FCMConfiguration.productionServer,
    highPriority: Bool = true,
    timeToLive: Duration = .seconds(3600),
    requestTimeout: Duration = .seconds(10),
    retry: PushRetryPolicy = PushRetryPolicy()
  ) {
    self.credentials = credentials
    self.server = server
    self.highPriority = highPriority
    self.timeToLive = timeToLive
    self.requestTimeout = requestTimeout
    self.retry = retry
  }
}

/// Sends data messages through FCM HTTP v1 (Google: "Send a message using FCM HTTP v1 API"): one
/// ``FCMRequest`` per push, with an OAuth2 access token obtained from the service account's signed
/// assertion and reused until it nears expiry (``FCMAccessTokenCache``). `UNREGISTERED` (404) and a
/// refused token answer ``PushDelivery/tokenInvalid``; `429` and `5xx` are retried by the
/// ``PushRetryPolicy``; `401` fetches a new access token.
///
/// ```swift
/// let credentials = try FCMCredentials(serviceAccountJSON: Data(contentsOf: serviceAccountFile))
/// let fcm = FCMSender(configuration: FCMConfiguration(credentials: credentials), httpClient: client)
/// ```
public final class FCMSender: PushGateway {
  private let configuration: FCMConfiguration
  private let httpClient: HTTPClient
  private let environment: PushSenderEnvironment
  private let logger: Logger
  private let tokens = Mutex(FCMAccessTokenCache())
  /// The access-token fetch under way, which every push without a token waits for.
  private let fetching = Mutex<Task<AccessToken, Never>?>(nil)

  /// A sender; `environment` gives the time (tests script it).
  public init(
    configuration: FCMConfiguration,
    httpClient: HTTPClient,
    environment: PushSenderEnvironment = .live,
    logger: Logger = Logger(label: "push.fcm")
  ) {
    self.configuration = configuration
    self.httpClient = httpClient
    self.environment = environment
    self.logger = logger
  }

  public func send(_ push: PushNotification) async -> PushDelivery {
    await PushAttempts.run(policy: configuration.retry, environment: environment, logger: logger, platform: "fcm") {
      renew in await attempt(push, renewingToken: renew)
    }
  }

  private func attempt(_ push: PushNotification, renewingToken: Bool) async -> PushAnswer {
    if renewingToken { tokens.withLock { $0.invalidate() } }
    let accessToken: String
    switch await currentAccessToken() {
    case .issued(let token): accessToken = token
    case .unavailable(let answer): return answer
    }
    let request = FCMRequest(
      push: push,
      accessToken: accessToken,
      projectID: configuration.credentials.projectID,
      highPriority: configuration.highPriority,
      timeToLive: configuration.timeToLive
    )
    do {
      let answer = try await PushHTTP.post(
        configuration.server + request.path,
        headers: request.headers,
        body: request.body,
        timeout: configuration.requestTimeout,
        on: httpClient
      )
      return PushAnswer.fcm(status: answer.status, headers: answer.headers, body: answer.body)
    } catch {
      logger.debug("FCM unreachable", metadata: ["error": "\(error)"])
      return .retry(after: nil)
    }
  }

  /// The cached access token, or a new one from the token endpoint: pushes that find none at the same
  /// time wait for the one fetch under way instead of each making its own.
  private func currentAccessToken() async -> AccessToken {
    let now = environment.now()
    if let token = tokens.withLock({ $0.token(at: now) }) { return .issued(token) }
    let fetch = fetching.withLock { current -> Task<AccessToken, Never> in
      if let current { return current }
      let fetch = Task { await self.fetchAccessToken(now: now) }
      current = fetch
      return fetch
    }
    let token = await fetch.value
    fetching.withLock { current in if current == fetch { current = nil } }
    return token
  }

  /// Exchanges the service account's signed assertion for an access token, and keeps it.
  private func fetchAccessToken(now: Timestamp) async -> AccessToken {
    let assertion: String
    do {
      assertion = try configuration.credentials.assertion(at: now)
    } catch {
      return .unavailable(.refused("the service account's key cannot sign: \(error)"))
    }
    let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
    let answer: PushHTTP.Answer
    do {
      answer = try await PushHTTP.post(
        configuration.credentials.tokenURI,
        headers: ["content-type": "application/x-www-form-urlencoded"],
        body: Data(form.utf8),
        timeout: configuration.requestTimeout,
        on: httpClient
      )
    } catch {
      return .unavailable(.retry(after: nil))
    }
    struct Issued: Decodable {
      var accessToken: String
      var expiresIn: Int
      enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case expiresIn = "expires_in"
      }
    }
    switch answer.status {
    case 200:
      guard let issued = try? JSONDecoder().decode(Issued.self, from: answer.body) else {
        return .unavailable(.retry(after: nil))
      }
      tokens.withLock { $0.store(issued.accessToken, expiresIn: .seconds(issued.expiresIn), at: now) }
      return .issued(issued.accessToken)
    case 429, 500...599:
      return .unavailable(.retry(after: nil))
    default:
      let reason = String(decoding: answer.body.prefix(200), as: UTF8.self)
      return .unavailable(.refused("the token endpoint refused the service account (\(answer.status)): \(reason)"))
    }
  }
}

/// An access token, or what stands in for the platform's answer when none could be had.
private enum AccessToken: Sendable {
  case issued(String)
  case unavailable(PushAnswer)
}
