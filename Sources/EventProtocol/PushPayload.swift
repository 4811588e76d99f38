/// What a push notification carries to an installation: a hint that its user's events moved on, and the
/// events themselves when they fit the platform's payload limit.
///
/// On the wire (inside the platform's push payload): `{"queue_id": "…", "last_event_id": 41, "events":
/// [{"id": 41, "type": "…", …}]}`. `queue_id` and `last_event_id` are absent when the installation's queue
/// has expired (the app wakes and registers); `events` is absent when they did not fit. A client applies
/// carried events only when they continue its finger exactly; otherwise it polls.
///
/// ```swift
/// let payload = try JSONDecoder().decode(PushPayload<MyEvent>.self, from: data)
/// await machine.pushReceived(payload)
/// ```
public struct PushPayload<Event: EventPayload>: Codable, Sendable, Equatable {
  /// The installation's live queue, when it has one.
  public var queueID: QueueID?
  /// That queue's latest event id at the time of the push.
  public var lastEventID: Int?
  /// The queue's unacknowledged events, when they fit the payload limit.
  public var events: [EventEnvelope<Event>]?

  /// Creates a PushPayload from its parts.
  public init(queueID: QueueID?, lastEventID: Int?, events: [EventEnvelope<Event>]?) {
    self.queueID = queueID
    self.lastEventID = lastEventID
    self.events = events
  }

  private enum CodingKeys: String, CodingKey {
    case queueID = "queue_id"
    case lastEventID = "last_event_id"
    case events
  }
}

/// A device's push token, as the platform (APNs, FCM) issued it.
public struct PushToken: RawRepresentable, Hashable, Codable, Sendable, ExpressibleByStringLiteral,
  CustomStringConvertible
{
  public let rawValue: String

  public init(rawValue: String) {
    self.rawValue = rawValue
  }

  public init(stringLiteral value: String) {
    self.rawValue = value
  }

  public var description: String { rawValue }
}

/// The push platform that issued a token, so the server knows which sender delivers to it. Sent with the
/// token (`platform=apns` or `platform=fcm`); a token registered without one goes to the server's default
/// sender.
public enum PushPlatform: String, Codable, Sendable, Hashable, CaseIterable {
  /// Apple Push Notification service: the device token, in hex.
  case apns
  /// Firebase Cloud Messaging (HTTP v1): the registration token.
  case fcm
}
