/// The application's own events, as carried in an ``EventEnvelope``.
///
/// A payload encodes as a JSON object whose fields sit beside the envelope's `id` and `type`, as Zulip's
/// events do (`{"id": 3, "type": "video_status", "video_id": "…"}`). It names its wire type, and which types
/// it can decode, so that an envelope of a type the client does not know is kept as
/// ``EventBody/unknown(type:)`` instead of breaking the batch it came in.
///
/// ```swift
/// struct Greeting: EventPayload {
///   static let knownEventTypes: Set<String> = ["greeting"]
///   var eventType: String { "greeting" }
///   var text: String
/// }
/// ```
public protocol EventPayload: Codable, Sendable, Equatable {
  /// The wire types this payload decodes. An envelope of any other type becomes ``EventBody/unknown(type:)``.
  static var knownEventTypes: Set<String> { get }

  /// The wire `type` of this event, used for the envelope and for queues' event-type filters.
  var eventType: String { get }
}

/// What an event in a queue carries: the application's payload or one of the server's own events.
public enum EventBody<Payload: EventPayload>: Sendable, Equatable {
  /// The server ends a long-poll that waited too long with a real event, so proxies keep the connection.
  case heartbeat
  /// The server restarted and restored this queue; queued events before it are intact.
  case restart
  /// An application event.
  case payload(Payload)
  /// An event of a type the payload does not know; kept so the rest of its batch still applies.
  case unknown(type: String)

  /// The reserved wire type of heartbeat events.
  public static var heartbeatType: String { "heartbeat" }
  /// The reserved wire type of restart events.
  public static var restartType: String { "restart" }

  /// The wire `type` of this event.
  public var type: String {
    switch self {
    case .heartbeat: Self.heartbeatType
    case .restart: Self.restartType
    case .payload(let payload): payload.eventType
    case .unknown(let type): type
    }
  }
}

/// One event as a queue holds it and a poll delivers it: an id, a body, and the write that caused it.
///
/// Ids start at 0 in each queue and strictly increase. On the wire an envelope is Zulip's event object:
/// `{"id": 0, "type": "heartbeat"}`, with the payload's fields beside `id` and `type`. An event produced by
/// a client's mutation carries, in the queues of the user who sent it, its ``origin``
/// (`"origin": {"client_id": "…", "mutation_id": 7}`), like Zulip's `local_message_id`: the sending client
/// then knows the write is in its confirmed state without waiting for the acknowledgement. The keys `id`,
/// `type` and `origin` are reserved; a payload must not use them.
public struct EventEnvelope<Payload: EventPayload>: Sendable, Equatable, Codable {
  /// The event's id within its queue.
  public var id: Int
  /// What the event carries.
  public var body: EventBody<Payload> {
    didSet { encodedPayload = nil }
  }
  /// The mutation that produced the event, in the queues of the user who sent it; `nil` otherwise.
  public var origin: MutationOrigin?
  /// The payload's members as the server's size check encoded them, written again verbatim when this
  /// envelope is encoded by the package's own coder (``WireJSON``) instead of encoding the payload again.
  /// Not part of the envelope's value: equality ignores it, and changing ``body`` drops it.
  @usableFromInline package var encodedPayload: EncodedMembers?

  /// Creates a EventEnvelope from its parts.
  ///
  /// Inlinable so a server answering a poll from code not specialised for the payload builds each envelope
  /// in place instead of calling across modules (and looking the envelope's layout up) per event.
  @inlinable @inline(__always)
  public init(id: Int, body: EventBody<Payload>, origin: MutationOrigin? = nil) {
    self.id = id
    self.body = body
    self.origin = origin
  }

  /// Creates an envelope carrying its payload's members already encoded (the server's answers).
  @inlinable @inline(__always)
  package init(id: Int, body: EventBody<Payload>, origin: MutationOrigin?, encodedPayload: EncodedMembers?) {
    self.id = id
    self.body = body
    self.origin = origin
    self.encodedPayload = encodedPayload
  }

  public init(from decoder: any Decoder) throws {
    // The package's own coder reads the envelope's members off its tape (`EventBatchCoding.swift`).
    if let tapeDecoder = decoder as? JSONTapeDecoder, tapeDecoder.nestedKeys.isEmpty {
      self = try tapeDecoder.decodeEnvelope()
      return
    }
    let container = try decoder.container(keyedBy: EnvelopeCodingKeys.self)
    self.id = try container.decode(Int.self, forKey: .id)
    self.origin = try container.decodeIfPresent(MutationOrigin.self, forKey: .origin)
    let type = try container.decode(String.self, forKey: .type)
    switch type {
    case EventBody<Payload>.heartbeatType: self.body = .heartbeat
    case EventBody<Payload>.restartType: self.body = .restart
    case _ where Payload.knownEventTypes.contains(type): self.body = .payload(try Payload(from: decoder))
    default: self.body = .unknown(type: type)
    }
  }

  public func encode(to encoder: any Encoder) throws {
    // The package's own coder writes the members directly, splicing the kept payload (`EventBatchCoding.swift`).
    if let json = encoder as? JSONValueEncoder { return try json.encodeEnvelope(self, asWholeValue: false) }
    if case .payload(let payload) = body { try payload.encode(to: encoder) }
    var container = encoder.container(keyedBy: EnvelopeCodingKeys.self)
    try container.encode(id, forKey: .id)
    try container.encode(body.type, forKey: .type)
    try container.encodeIfPresent(origin, forKey: .origin)
  }
}

extension EventEnvelope {
  /// Envelopes are equal when their id, body and origin are (however they would be encoded).
  public static func == (lhs: Self, rhs: Self) -> Bool {
    lhs.id == rhs.id && lhs.body == rhs.body && lhs.origin == rhs.origin
  }
}

/// The envelope's own keys. Outside the generic type on purpose: a nested type of a generic type is itself
/// generic, and looking its metadata up at run time was a tenth of decoding a batch (`perf`, Bench W3).
enum EnvelopeCodingKeys: String, CodingKey {
  case id
  case type
  case origin
}
