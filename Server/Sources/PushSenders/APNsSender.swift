import AsyncHTTPClient
import EventProtocol
import EventServer
import Foundation
import Logging
import Synchronization

/// Where and how an ``APNsSender`` sends.
public struct APNsConfiguration: Sendable {
  /// Apple's production server.
  public static let productionServer = "https://api.push.apple.com"
  /// Apple's development server, for apps signed for development.
  public static let sandboxServer = "https://api.sandbox.push.apple.com"

  /// The token-based credentials.
  public var credentials: APNsCredentials
  /// The app's bundle id (`apns-topic`).
  public var topic: String
  /// The server's base URL: ``productionServer``, ``sandboxServer``, or a fake in tests.
  public var server: String
  /// How long APNs keeps trying a device that is offline.
  public var expiresAfter: Duration
  /// The deadline of each request.
  public var requestTimeout: Duration
  /// When to send again.
  public var retry: PushRetryPolicy

  /// A configuration; APNs keeps a push for an offline device an hour, each request has ten seconds.
  public init(
    credentials: APNsCredentials,
    topic: String,
    server: String = APNsConfiguration.productionServer,
    expiresAfter: Duration = .seconds(3600),
    requestTimeout: Duration = .seconds(10),
    retry: PushRetryPolicy = PushRetryPolicy()
  ) {
    self.credentials = credentials
    self.topic = topic
    self.server = server
    self.expiresAfter = expiresAfter
    self.requestTimeout = requestTimeout
    self.retry = retry
  }
}

/// Sends background pushes through APNs over HTTP/2 with token authentication (Apple: "Sending
/// notification requests to APNs"): one ``APNsRequest`` per push, its provider token reused 50 minutes
/// (``APNsTokenCache``). A token APNs calls gone (`410`, `BadDeviceToken`) answers
/// ``PushDelivery/tokenInvalid`` so the server drops it; `429` and `5xx` are retried by the
/// ``PushRetryPolicy``; `ExpiredProviderToken` makes a new provider token.
///
/// ```swift
/// let client = HTTPClient(eventLoopGroupProvider: .singleton)
/// let apns = APNsSender(
///   configuration: APNsConfiguration(credentials: credentials, topic: "com.example.videos"),
///   httpClient: client
/// )
/// ```
/// The HTTP client is the caller's (it shuts it down); AsyncHTTPClient speaks HTTP/2 to any server that
/// offers it, as APNs does.
public final class APNsSender: PushGateway {
  private let configuration: APNsConfiguration
  private let httpClient: HTTPClient
  private let environment: PushSenderEnvironment
  private let logger: Logger
  private let tokens = Mutex(APNsTokenCache())

  /// A sender; `environment` gives the time (tests script it).
  public init(
    configuration: APNsConfiguration,
    httpClient: HTTPClient,
    environment: PushSenderEnvironment = .live,
    logger: Logger = Logger(label: "push.apns")
  ) {
    self.configuration = configuration
    self.httpClient = httpClient
    self.environment = environment
    self.logger = logger
  }

  public func send(_ push: PushNotification) async -> PushDelivery {
    await PushAttempts.run(policy: configuration.retry, environment: environment, logger: logger, platform: "apns") {
      renew in await attempt(push, renewingToken: renew)
    }
  }

  private func attempt(_ push: PushNotification, renewingToken: Bool) async -> PushAnswer {
    let now = environment.now()
    let providerToken: String
    do {
      providerToken = try tokens.withLock { cache in
        if renewingToken { cache.invalidate() }
        return try cache.token(at: now, credentials: configuration.credentials)
      }
    } catch {
      return .refused("the APNs signing key cannot sign: \(error)")
    }
    let request = APNsRequest(
      push: push,
      token: providerToken,
      topic: configuration.topic,
      expiresAfter: configuration.expiresAfter,
      now: now
    )
    do {
      let answer = try await PushHTTP.post(
        configuration.server + request.path,
        headers: request.headers.merging(["content-type": "application/json"]) { old, _ in old },
        body: request.body,
        timeout: configuration.requestTimeout,
        on: httpClient
      )
      return PushAnswer.apns(status: answer.status, headers: answer.headers, body: answer.body)
    } catch {
      logger.debug("APNs unreachable", metadata: ["error": "\(error)"])
      return .retry(after: nil)
    }
  }
}
