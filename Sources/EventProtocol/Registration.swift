/// The answer to a register request: a snapshot atomic with an event finger.
///
/// Until an event arrives after ``lastEventID``, ``snapshot`` is exactly the server's state for the user;
/// applying every later event keeps it so. On the wire it is Zulip's `/register` reply, with the snapshot's
/// fields beside `queue_id` and `last_event_id`:
///
/// ```json
/// {"result": "success", "msg": "", "queue_id": "fb67bf8a-…", "last_event_id": -1,
///  "event_queue_longpoll_timeout_seconds": 90, "videos": […]}
/// ```
public struct Registration<Snapshot: Codable & Sendable & Equatable>: Sendable, Equatable, Codable {
  /// The new queue.
  public var queueID: QueueID
  /// The id of the last event already reflected in the snapshot; `-1` for a new queue.
  public var lastEventID: Int
  /// The client's long-poll timeout the server recommends (a little above its heartbeat ceiling).
  public var longPollTimeout: Duration?
  /// The state of the application for the user, atomic with the finger.
  public var snapshot: Snapshot

  /// Creates a Registration from its parts.
  public init(queueID: QueueID, lastEventID: Int, longPollTimeout: Duration?, snapshot: Snapshot) {
    self.queueID = queueID
    self.lastEventID = lastEventID
    self.longPollTimeout = longPollTimeout
    self.snapshot = snapshot
  }

  /// The finger to poll with.
  public var finger: EventFinger {
    EventFinger(queueID: queueID, lastEventID: lastEventID)
  }

  private enum CodingKeys: String, CodingKey {
    case result
    case message = "msg"
    case queueID = "queue_id"
    case lastEventID = "last_event_id"
    case longPollTimeout = "event_queue_longpoll_timeout_seconds"
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    self.queueID = try container.decode(QueueID.self, forKey: .queueID)
    self.lastEventID = try container.decode(Int.self, forKey: .lastEventID)
    self.longPollTimeout = try container.decodeIfPresent(Double.self, forKey: .longPollTimeout)
      .map(Duration.fractionalSeconds)
    self.snapshot = try Snapshot(from: decoder)
  }

  public func encode(to encoder: any Encoder) throws {
    try snapshot.encode(to: encoder)
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("success", forKey: .result)
    try container.encode("", forKey: .message)
    try container.encode(queueID, forKey: .queueID)
    try container.encode(lastEventID, forKey: .lastEventID)
    try container.encodeIfPresent(longPollTimeout.map { Int($0.components.seconds) }, forKey: .longPollTimeout)
  }
}

/// A snapshot with no fields, for registrations that only want events.
public struct EmptySnapshot: Codable, Sendable, Equatable {
  /// Creates the empty snapshot.
  public init() {}
  public init(from decoder: any Decoder) throws {}
  public func encode(to encoder: any Encoder) throws {}
}
