import EventProtocol
import EventServer

/// Routes each push to the sender of its token's platform (``PushNotification/platform``): APNs tokens to
/// an ``APNsSender``, FCM tokens to an ``FCMSender``. A token registered without a platform goes to
/// `unspecified`'s sender; a push for a platform with no sender goes to `fallback` (a logging gateway, say).
///
/// ```swift
/// let gateway = PlatformPushGateway(apns: apnsSender, fcm: fcmSender, fallback: LoggingPushGateway(logger: logger))
/// ```
public struct PlatformPushGateway: PushGateway {
  private let apns: (any PushGateway)?
  private let fcm: (any PushGateway)?
  private let unspecified: PushPlatform?
  private let fallback: any PushGateway

  /// A router over the senders configured.
  /// - Parameters:
  ///   - unspecified: The platform of tokens registered without one; when `nil`, the only sender
  ///     configured if there is just one.
  public init(
    apns: (any PushGateway)?,
    fcm: (any PushGateway)?,
    unspecified: PushPlatform? = nil,
    fallback: any PushGateway
  ) {
    self.apns = apns
    self.fcm = fcm
    self.fallback = fallback
    switch (unspecified, apns, fcm) {
    case (.some(let platform), _, _): self.unspecified = platform
    case (nil, .some, nil): self.unspecified = .apns
    case (nil, nil, .some): self.unspecified = .fcm
    default: self.unspecified = nil
    }
  }

  /// The gateway a push goes to.
  func gateway(for platform: PushPlatform?) -> any PushGateway {
    switch platform ?? unspecified {
    case .apns: apns ?? fallback
    case .fcm: fcm ?? fallback
    case nil: fallback
    }
  }

  public func send(_ push: PushNotification) async -> PushDelivery {
    await gateway(for: push.platform).send(push)
  }
}
