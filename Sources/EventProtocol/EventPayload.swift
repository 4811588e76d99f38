import JSONCoding

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
  /// The body and its kept encoding, shared by every envelope of the same stored event (an
  /// ``EventContent`` of this payload, or a ``MarkerContent`` for an event without one; stored as their base
  /// class so the envelope's layout does not depend on the payload).
  @usableFromInline package var storage: EventContentStorage
  /// The mutation that produced the event, in the queues of the user who sent it; `nil` otherwise.
  public var origin: MutationOrigin?

  /// What the event carries.
  public var body: EventBody<Payload> {
    // Inlinable so that a loop over envelopes in code not specialised for the payload (a client applying a
    // batch) can look the content's and body's generic types up once, not once per event.
    @inlinable @inline(__always) get {
      // Every initialiser and setter stores an `EventContent<Payload>` or a `MarkerContent`.
      if type(of: storage) == MarkerContent.self { return unsafeDowncast(storage, to: MarkerContent.self).body() }
      return .payload(unsafeDowncast(storage, to: EventContent<Payload>.self).payload)
    }
    set { storage = EventContentStorage.of(newValue, encodedPayload: nil) }
  }

  /// The payload, when the event carries one (``body`` is `.payload`), read without making the body: for the
  /// loops over a batch's events (applying them, writing them).
  @inlinable @inline(__always) package var payload: Payload? {
    type(of: storage) == MarkerContent.self ? nil : unsafeDowncast(storage, to: EventContent<Payload>.self).payload
  }

  /// The content holding the payload, `nil` for an event without one: code not specialised for the payload
  /// reads the payload from it in place (`content.payload`) where reading ``payload`` copies it.
  @inlinable @inline(__always) package var content: EventContent<Payload>? {
    type(of: storage) == MarkerContent.self ? nil : unsafeDowncast(storage, to: EventContent<Payload>.self)
  }

  /// The payload's members as the server's size check encoded them, written again verbatim when this
  /// envelope is encoded by the package's own coder (``WireJSON``) instead of encoding the payload again.
  /// Not part of the envelope's value: equality ignores it, and changing ``body`` drops it.
  @inlinable package var encodedPayload: EncodedMembers? {
    get { storage.encodedPayload }
    set { storage = EventContentStorage.of(body, encodedPayload: newValue) }
  }

  /// Creates a EventEnvelope from its parts.
  @inlinable @inline(__always)
  public init(id: Int, body: EventBody<Payload>, origin: MutationOrigin? = nil) {
    self.id = id
    self.storage = EventContentStorage.of(body, encodedPayload: nil)
    self.origin = origin
  }

  /// Creates a EventEnvelope from its parts, keeping the payload's encoding.
  @inlinable @inline(__always)
  package init(id: Int, body: EventBody<Payload>, origin: MutationOrigin?, encodedPayload: EncodedMembers?) {
    self.id = id
    self.storage = EventContentStorage.of(body, encodedPayload: encodedPayload)
    self.origin = origin
  }

  /// Creates an envelope of a stored event's content, shared with every other envelope of that event.
  ///
  /// Inlinable so a server answering a poll from code not specialised for the payload builds each envelope
  /// in place: the envelope's layout does not depend on the payload, so copying one is a reference count.
  @inlinable @inline(__always)
  package init(id: Int, storage: EventContentStorage, origin: MutationOrigin?) {
    self.id = id
    self.storage = storage
    self.origin = origin
  }

  public init(from decoder: any Decoder) throws {
    // The package's own coder reads the envelope's members off its tape (`EventBatchCoding.swift`).
    if let tapeDecoder = decoder as? JSONTapeDecoder, tapeDecoder.nestedKeys.isEmpty {
      self = try tapeDecoder.decodeEnvelope()
      return
    }
    let container = try decoder.container(keyedBy: EnvelopeCodingKeys.self)
    let id = try container.decode(Int.self, forKey: .id)
    let origin = try container.decodeIfPresent(MutationOrigin.self, forKey: .origin)
    let type = try container.decode(String.self, forKey: .type)
    let body: EventBody<Payload> =
      switch type {
      case EventBody<Payload>.heartbeatType: .heartbeat
      case EventBody<Payload>.restartType: .restart
      case _ where Payload.knownEventTypes.contains(type): .payload(try Payload(from: decoder))
      default: .unknown(type: type)
      }
    self.init(id: id, body: body, origin: origin)
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
    lhs.id == rhs.id && lhs.origin == rhs.origin && (lhs.storage === rhs.storage || lhs.body == rhs.body)
  }
}

/// A stored event's payload with the encoding its size check made, held by reference: every queue's
/// envelope of one event shares one, so answering a poll copies a reference per event instead of the payload.
/// An event without a payload (a heartbeat, a restart, a type the payload does not know) is a
/// ``MarkerContent`` instead.
///
/// An envelope of a payload type the server's code is not specialised for (another module's) then has a
/// layout that does not depend on the payload: building, copying and dropping envelopes in a poll's answer
/// takes no look-up of the payload's layout and no call through its value witnesses (Bench W1). The content
/// holds the payload itself rather than an `EventBody<Payload>`, so that making and freeing one in code not
/// specialised for the payload looks no derived generic type up (the payload's own type comes with the
/// class's).
/// Immutable: changing an envelope's body gives it a new content.
///
/// Sendable unchecked only because a subclass of a non-final class cannot be checked: its property and
/// its base class's are `let`s of `Sendable` types (`Payload: Sendable`, `KeptBytes`, `String`), so it
/// is never written after its initialiser returns.
@usableFromInline package final class EventContent<Payload: EventPayload>: EventContentStorage, @unchecked Sendable {
  /// What the event carries.
  @usableFromInline package let payload: Payload

  /// Creates the content of an event carrying `payload`, with the bytes kept of it and, when they are the
  /// payload's members, the event's type.
  @inlinable package init(payload: Payload, kept: KeptBytes?, encodedType: String) {
    self.payload = payload
    super.init(kept: kept, encodedType: encodedType)
  }
}

/// The content of an event without a payload: a heartbeat, a restart, or a type the payload does not know.
/// Nothing of it is kept encoded (its envelope is written from its type alone).
///
/// Sendable unchecked only because a subclass of a non-final class cannot be checked: its property is a
/// `let` of a `Sendable` type, and its base class's are `nil` and empty.
@usableFromInline package final class MarkerContent: EventContentStorage, @unchecked Sendable {
  /// Which event it is.
  @usableFromInline package enum Marker: Sendable {
    case heartbeat
    case restart
    case unknown(type: String)
  }

  /// Which event this is.
  @usableFromInline package let marker: Marker

  /// Every heartbeat's content.
  @usableFromInline package static let heartbeat = MarkerContent(.heartbeat)
  /// Every restart's content.
  @usableFromInline package static let restart = MarkerContent(.restart)

  /// The content of the event `marker` (heartbeats and restarts share ``heartbeat`` and ``restart``).
  @usableFromInline package init(_ marker: Marker) {
    self.marker = marker
    super.init(kept: nil, encodedType: "")
  }

  /// The event's body, for any payload type.
  @inlinable package func body<Payload: EventPayload>() -> EventBody<Payload> {
    switch marker {
    case .heartbeat: .heartbeat
    case .restart: .restart
    case .unknown(let type): .unknown(type: type)
    }
  }
}

extension EventContentStorage {
  /// The content of an event with `body`: an ``EventContent`` keeping `encodedPayload` (the payload's members
  /// as the server's size check encoded them) when it carries a payload, else a ``MarkerContent``.
  @inlinable @inline(__always)
  package static func of<Payload: EventPayload>(
    _ body: EventBody<Payload>,
    encodedPayload: EncodedMembers?
  ) -> EventContentStorage {
    switch body {
    case .payload(let payload):
      EventContent(
        payload: payload,
        kept: encodedPayload.map(KeptBytes.members),
        encodedType: encodedPayload == nil ? "" : payload.eventType
      )
    case .heartbeat: MarkerContent.heartbeat
    case .restart: MarkerContent.restart
    case .unknown(let type): MarkerContent(.unknown(type: type))
    }
  }
}

/// An ``EventEnvelope``'s stored properties without its payload type: the same types in the same order, so
/// the same layout (Swift lays a struct's stored properties out in declaration order from their types
/// alone; ``hasEnvelopeLayout(_:)`` checks it). A server answering a poll from code not specialised for the
/// payload writes its envelopes through this type, with no look-up of the payload type per event.
@usableFromInline package struct StoredEnvelope {
  @usableFromInline package var id: Int
  @usableFromInline package var storage: EventContentStorage
  @usableFromInline package var origin: MutationOrigin?

  /// An envelope of `content`.
  @inlinable package init(id: Int, storage: EventContentStorage, origin: MutationOrigin?) {
    self.id = id
    self.storage = storage
    self.origin = origin
  }

  /// Whether envelopes of `Payload` are laid out as this type: same size, stride, alignment and offsets.
  package static func hasEnvelopeLayout<Payload: EventPayload>(_: Payload.Type) -> Bool {
    typealias Envelope = EventEnvelope<Payload>
    return MemoryLayout<Envelope>.size == MemoryLayout<Self>.size
      && MemoryLayout<Envelope>.stride == MemoryLayout<Self>.stride
      && MemoryLayout<Envelope>.alignment == MemoryLayout<Self>.alignment
      && MemoryLayout<Envelope>.offset(of: \.id) == MemoryLayout<Self>.offset(of: \.id)
      && MemoryLayout<Envelope>.offset(of: \.storage) == MemoryLayout<Self>.offset(of: \.storage)
      && MemoryLayout<Envelope>.offset(of: \.origin) == MemoryLayout<Self>.offset(of: \.origin)
  }
}

/// What an ``EventEnvelope`` stores: an ``EventContent`` of its payload (or a ``MarkerContent`` for an event
/// without one), seen through this base class so that the envelope's stored properties do not mention the
/// payload type.
///
/// The kept encoding is here rather than in the subclass so that code not specialised for the payload (a
/// poll's answer written by the package's coder) reads it, and the event's type, with no look-up of the
/// payload type's metadata: a generic class's fields are found through its metadata, a plain class's are
/// not.
///
/// Sendable unchecked only because a non-final class cannot be checked: its properties are `let`s of
/// `Sendable` types, and its two subclasses (``EventContent``, ``MarkerContent``, both final) hold `let`s of
/// `Sendable` types only.
@usableFromInline package class EventContentStorage: @unchecked Sendable {
  /// The bytes kept: the payload's members as the server's size check encoded them, or the envelope as it
  /// arrived in a poll's answer (one or the other, in one field, so that the content stays as small as it
  /// is: every envelope of a poll's answer allocates one, and its size is a poll's decode time).
  @usableFromInline package let kept: KeptBytes?
  /// The event's wire `type` when ``encodedPayload`` is kept (written beside the kept members); empty
  /// otherwise.
  @usableFromInline package let encodedType: String

  @inlinable init(kept: KeptBytes?, encodedType: String) {
    self.kept = kept
    self.encodedType = encodedType
  }

  /// The payload's members as the server's size check encoded them, if it did.
  @inlinable package var encodedPayload: EncodedMembers? {
    if case .members(let members)? = kept { members } else { nil }
  }

  /// Where the envelope object this event was decoded from is, when it came in a poll's answer.
  @inlinable package var arrived: ArrivedEnvelope? {
    if case .arrived(let arrived)? = kept { arrived } else { nil }
  }
}

/// The bytes an event's content keeps of an encoding, for writing it again by copying.
@usableFromInline package enum KeptBytes: Sendable {
  /// The payload's members as the server's size check encoded them (written beside the envelope's own).
  case members(EncodedMembers)
  /// The whole envelope object as it arrived in a poll's answer (what a journal entry copies).
  case arrived(ArrivedEnvelope)
}

/// Where an envelope's object is in the bytes of the answer it arrived in. The bytes are the answer's own
/// array, shared by every envelope decoded from it (kept alive while any of them is).
@usableFromInline package struct ArrivedEnvelope: Sendable {
  /// The whole answer.
  @usableFromInline package let answer: [UInt8]
  /// The object's first byte (`{`) and the index just past its last (`}`).
  @usableFromInline package let start: UInt32
  @usableFromInline package let end: UInt32

  @inlinable package init(answer: [UInt8], start: UInt32, end: UInt32) {
    self.answer = answer
    self.start = start
    self.end = end
  }
}

/// The envelope's own keys. Outside the generic type on purpose: a nested type of a generic type is itself
/// generic, and looking its metadata up at run time was a tenth of decoding a batch (`perf`, Bench W3).
enum EnvelopeCodingKeys: String, CodingKey {
  case id
  case type
  case origin
}
