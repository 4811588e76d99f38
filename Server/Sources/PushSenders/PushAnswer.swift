import Foundation

/// What a push platform's answer means for the server, for APNs and FCM alike (a pure reading of status,
/// headers and body; the senders act on it).
public enum PushAnswer: Sendable, Hashable {
  /// Accepted.
  case accepted
  /// The token is gone: the server drops it (APNs 410 `Unregistered`, 400 `BadDeviceToken`; FCM 404
  /// `UNREGISTERED`, 400 `INVALID_ARGUMENT` on the token).
  case tokenInvalid
  /// Throttled or the platform failed: send again after the wait (429, 5xx; `Retry-After` when given,
  /// else the sender's backoff).
  case retry(after: Duration?)
  /// The provider token was refused (APNs `ExpiredProviderToken`, `InvalidProviderToken`; FCM 401): make a
  /// new one and send again.
  case renewCredentials
  /// Refused for a reason sending again will not fix (a payload too large, a wrong topic): logged, dropped.
  case refused(String)

  /// Reads an APNs answer: the status and the `reason` of its JSON body.
  public static func apns(status: Int, headers: [String: String], body: Data) -> PushAnswer {
    let reason = (try? JSONDecoder().decode(Reason.self, from: body))?.reason ?? ""
    switch (status, reason) {
    case (200, _): return .accepted
    case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"): return .tokenInvalid
    case (403, "ExpiredProviderToken"), (403, "InvalidProviderToken"): return .renewCredentials
    case (429, _), (500...599, _): return .retry(after: retryAfter(headers))
    default: return .refused("APNs \(status) \(reason)")
    }
  }

  /// Reads an FCM HTTP v1 answer: the status and the `error.status` / FCM error code of its JSON body.
  public static func fcm(status: Int, headers: [String: String], body: Data) -> PushAnswer {
    let error = (try? JSONDecoder().decode(FCMError.self, from: body))?.error
    let code = error?.details?.compactMap(\.errorCode).first ?? error?.status ?? ""
    switch (status, code) {
    case (200, _): return .accepted
    case (404, _), (_, "UNREGISTERED"): return .tokenInvalid
    case (400, "INVALID_ARGUMENT") where error?.message?.localizedCaseInsensitiveContains("token") == true:
      return .tokenInvalid
    case (401, _): return .renewCredentials
    case (429, _), (500...599, _): return .retry(after: retryAfter(headers))
    default: return .refused("FCM \(status) \(code)")
    }
  }

  private static func retryAfter(_ headers: [String: String]) -> Duration? {
    guard let text = headers["retry-after"], let seconds = Int(text), seconds >= 0 else { return nil }
    return .seconds(min(seconds, 3600))
  }

  private struct Reason: Decodable {
    var reason: String
  }

  private struct FCMError: Decodable {
    struct Body: Decodable {
      struct Detail: Decodable {
        var errorCode: String?
      }
      var status: String?
      var message: String?
      var details: [Detail]?
    }
    var error: Body
  }
}
