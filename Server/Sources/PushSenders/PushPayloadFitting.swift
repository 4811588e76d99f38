import Foundation

/// Fitting the server's push payload (`{"queue_id":…,"last_event_id":…,"events":[…]}`) into a platform's
/// size limit: whole when it fits, else without its events (the app then polls, as for a bare hint), else
/// empty (`{}`: a bare wake-up).
enum PushPayloadFitting {
  /// `payload`, or a smaller form of it, at most `limit` bytes once `overhead` bytes of the platform's own
  /// wrapping are counted.
  static func fit(_ payload: Data, within limit: Int, overhead: Int) -> Data {
    if payload.count + overhead <= limit { return payload }
    if var object = (try? JSONSerialization.jsonObject(with: payload)) as? [String: Any] {
      object["events"] = nil
      if let slim = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]),
        slim.count + overhead <= limit
      {
        return slim
      }
    }
    return Data("{}".utf8)
  }
}
