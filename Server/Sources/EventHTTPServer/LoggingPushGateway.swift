import EventServer
import Logging

/// A push gateway that logs each push instead of sending it.
///
/// An APNs or FCM sender plugs in here: conform to `PushGateway`, post `push.payload` (JSON of a
/// `PushPayload`, at most 4 KiB) to the platform for `push.token`, and answer `.tokenInvalid` when the
/// platform says the token is gone (APNs 410 `Unregistered`, FCM `UNREGISTERED`), so the server stops
/// pushing to it. Pass it to ``EventHTTPServer`` as its `pushGateway`.
public struct LoggingPushGateway: PushGateway {
  let logger: Logger

  /// A gateway logging to `logger`.
  public init(logger: Logger) {
    self.logger = logger
  }

  public func send(_ push: PushNotification) async -> PushDelivery {
    logger.info(
      "push",
      metadata: [
        "user": "\(push.installation.user)", "client": "\(push.installation.clientID)",
        "bytes": "\(push.payload.count)",
      ]
    )
    return .accepted
  }
}
