import EventProtocol
import EventServer
import Logging

/// A push gateway that logs each push instead of sending it: the default when no platform is configured.
///
/// The `PushSenders` module has the real senders (`APNsSender`, `FCMSender`, routed by
/// `PlatformPushGateway`); pass one to ``EventHTTPServer`` as its `pushGateway`.
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
        "platform": "\(push.platform?.rawValue ?? "unspecified")",
        "bytes": "\(push.payload.count)",
      ]
    )
    return .accepted
  }
}
