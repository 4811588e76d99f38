import JSONCoding
/// The answer to a poll: every event after the poll's `last_event_id` that the queue still holds.
///
/// On the wire it is Zulip's `/events` reply: `{"result": "success", "msg": "", "events": [...],
/// "queue_id": "…"}`. An event of a type the payload does not know decodes as
/// ``EventBody/unknown(type:)``, so the rest of the batch still applies.
public struct EventsReply<Payload: EventPayload>: Sendable, Equatable, Codable {
  /// The events, in increasing id order.
  public var events: [EventEnvelope<Payload>]
  /// The queue polled; Zulip includes it, and omits it on `dont_block` replies.
  public var queueID: QueueID?

  /// Creates a EventsReply from its parts.
  public init(events: [EventEnvelope<Payload>], queueID: QueueID?) {
    self.events = events
    self.queueID = queueID
  }

  public init(from decoder: any Decoder) throws {
    if let tapeDecoder = decoder as? JSONTapeDecoder, tapeDecoder.nestedKeys.isEmpty {
      self = try tapeDecoder.decodeEventsReply()
      return
    }
    let container = try decoder.container(keyedBy: EventsReplyCodingKeys.self)
    self.events = try container.decode([EventEnvelope<Payload>].self, forKey: .events)
    for (previous, next) in zip(events, events.dropFirst()) where next.id <= previous.id {
      throw EventAPIError.malformedResponse("event id \(next.id) after \(previous.id): ids must strictly increase")
    }
    self.queueID = try container.decodeIfPresent(QueueID.self, forKey: .queueID)
  }

  public func encode(to encoder: any Encoder) throws {
    if let json = encoder as? JSONValueEncoder { return try json.encodeEventsReply(self) }
    var container = encoder.container(keyedBy: EventsReplyCodingKeys.self)
    try container.encode("success", forKey: .result)
    try container.encode("", forKey: .message)
    try container.encode(events, forKey: .events)
    try container.encodeIfPresent(queueID, forKey: .queueID)
  }
}

/// The reply's keys, outside the generic type (see `EnvelopeCodingKeys`).
enum EventsReplyCodingKeys: String, CodingKey {
  case result
  case message = "msg"
  case events
  case queueID = "queue_id"
}
