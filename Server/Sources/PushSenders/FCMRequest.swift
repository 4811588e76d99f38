import EventProtocol
import EventServer
import Foundation

/// One FCM HTTP v1 request for one push: a data message that wakes the app to sync, the server's push
/// payload as the `sync` data value.
///
/// `POST /v1/projects/<project>/messages:send` with `authorization: Bearer <access token>`; the body is
/// `{"message":{"token":…,"data":{"sync":"<payload JSON>"},"android":{"priority":…,"ttl":"3600s"}}}`.
/// FCM refuses data over 4,096 bytes, so a payload that would not fit goes without its events.
public struct FCMRequest: Sendable, Hashable {
  /// The most bytes of data (keys and values) FCM accepts in a message.
  public static let maximumDataBytes = 4_096

  /// The request's path.
  public var path: String
  /// Its headers, by lower-case name.
  public var headers: [String: String]
  /// Its JSON body.
  public var body: Data

  /// The request for `push`.
  /// - Parameters:
  ///   - accessToken: The OAuth2 access token (``FCMAccessTokenCache``).
  ///   - projectID: The Firebase project.
  ///   - highPriority: Android priority `HIGH` (delivered at once, waking a dozing device) or `NORMAL`.
  ///   - timeToLive: How long FCM keeps trying an offline device.
  public init(push: PushNotification, accessToken: String, projectID: String, highPriority: Bool, timeToLive: Duration)
  {
    path = "/v1/projects/\(projectID)/messages:send"
    headers = ["authorization": "Bearer \(accessToken)", "content-type": "application/json"]
    let payload = PushPayloadFitting.fit(Data(push.payload), within: Self.maximumDataBytes, overhead: "sync".utf8.count)
    let message = Message(
      message: .init(
        token: push.token.rawValue,
        data: ["sync": String(decoding: payload, as: UTF8.self)],
        android: .init(priority: highPriority ? "HIGH" : "NORMAL", ttl: "\(timeToLive.components.seconds)s")
      )
    )
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    body = (try? encoder.encode(message)) ?? Data()
  }

  private struct Message: Encodable {
    struct Body: Encodable {
      struct Android: Encodable {
        var priority: String
        var ttl: String
      }
      var token: String
      var data: [String: String]
      var android: Android
    }
    var message: Body
  }
}
