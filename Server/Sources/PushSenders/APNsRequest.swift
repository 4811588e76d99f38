import EventProtocol
import EventServer
import Foundation

/// One APNs request for one push, as the HTTP/2 sender sends it: a background (silent) notification that
/// wakes the app to sync, carrying the server's push payload under `sync`.
///
/// `POST /3/device/<token>` with `authorization: bearer <JWT>`, `apns-topic` (the app's bundle id),
/// `apns-push-type: background`, `apns-priority: 5` (Apple requires 5 for background pushes) and
/// `apns-expiration` (after which APNs stops trying: a stale sync hint is worth nothing). The body is
/// `{"aps":{"content-available":1},"sync":<payload>}`; APNs refuses bodies over 4,096 bytes, so a payload
/// that would not fit goes without its events (`"events"` removed: the app then polls, as for a bare hint).
public struct APNsRequest: Sendable, Hashable {
  /// The largest body APNs accepts for a notification.
  public static let maximumBodyBytes = 4_096

  /// The request's path.
  public var path: String
  /// Its headers, by lower-case name.
  public var headers: [String: String]
  /// Its JSON body.
  public var body: Data

  /// The request for `push`.
  /// - Parameters:
  ///   - token: The provider token (``APNsTokenCache``).
  ///   - topic: The app's bundle id.
  ///   - expiresAfter: How long APNs keeps trying an offline device.
  ///   - now: The current time.
  public init(push: PushNotification, token: String, topic: String, expiresAfter: Duration, now: Timestamp) {
    path = "/3/device/\(push.token.rawValue)"
    let expiration = now.advanced(by: expiresAfter).sinceEpoch.components.seconds
    headers = [
      "authorization": "bearer \(token)",
      "apns-topic": topic,
      "apns-push-type": "background",
      "apns-priority": "5",
      "apns-expiration": String(expiration),
    ]
    body = Self.body(wrapping: Data(push.payload))
  }

  /// `{"aps":{"content-available":1},"sync":payload}`, without the payload's events when that would be over
  /// ``maximumBodyBytes``, and with an empty payload when even that is too big.
  static func body(wrapping payload: Data) -> Data {
    let prefix = Data(#"{"aps":{"content-available":1},"sync":"#.utf8)
    let fitted = PushPayloadFitting.fit(payload, within: maximumBodyBytes, overhead: prefix.count + 1)
    return prefix + fitted + Data("}".utf8)
  }
}
