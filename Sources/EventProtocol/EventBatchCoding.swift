import JSONCoding

/// A poll's answer (``EventsReply``) through the package's own coder without `Codable`'s containers for the
/// reply and its envelopes: the envelopes' `id`, `type` and `origin` are read off the tape and written into
/// the output directly, and each payload goes to its own `init(from:)` or `encode(to:)` once (to its own
/// fields when it adopts `JSONFieldsCodable`; or, when the server's size check kept its bytes, is spliced in).
///
/// The bytes written and the values and errors read are those of the `Codable` path (`EventsReply`'s and
/// `EventEnvelope`'s `init(from:)` and `encode(to:)`, which Foundation's coders still take); `EventBatchCodingTests`
/// compares the two. What it saves, per event: a keyed container and its box for the envelope, the generic
/// array's element-by-element `Decodable` calls, and the run-time metadata lookups each of those makes in
/// code that is not specialised for the payload (docs/decisions/0003-a-json-coder-of-our-own.md).
extension JSONTapeDecoder {
  /// Decodes an ``EventsReply`` from the object this decoder is on.
  func decodeEventsReply<Payload: EventPayload>() throws -> EventsReply<Payload> {
    guard tape[index].kind == .object else { throw tape.mismatch([String: Int].self, at: index, path: codingPath) }
    guard let eventsIndex = tape.member(named: EventsReplyCodingKeys.events.stringValue, of: index) else {
      throw JSONTape.keyNotFound(EventsReplyCodingKeys.events, path: codingPath)
    }
    let events: [EventEnvelope<Payload>]
    let disorder: (previous: Int, next: Int)?
    if tape[eventsIndex].isStreamed {
      // Decoded as the body was parsed (`WireFormat.decode`); its first failure is thrown here, where the
      // array's own decoding would have thrown it.
      guard let streamed = tape.streamer as? StreamedEnvelopes<Payload> else {
        throw tape.streamedArrayRead(path: codingPath + [EventsReplyCodingKeys.events])
      }
      events = try streamed.takeEvents()
      disorder = streamed.order.firstDisorder
    } else {
      var order = EnvelopeIDOrder()
      events = try tape.decodeEnvelopes(
        at: eventsIndex,
        key: EventsReplyCodingKeys.events,
        decoder: self,
        order: &order
      )
      disorder = order.firstDisorder
    }
    if let disorder {
      throw EventAPIError.malformedResponse(
        "event id \(disorder.next) after \(disorder.previous): ids must strictly increase"
      )
    }
    var queueID: QueueID?
    if let queueIndex = tape.member(named: EventsReplyCodingKeys.queueID.stringValue, of: index),
      tape[queueIndex].kind != .null
    {
      queueID = try tape.decodeValue(QueueID.self, at: queueIndex, key: EventsReplyCodingKeys.queueID, decoder: self)
    }
    return EventsReply(events: events, queueID: queueID)
  }
}

extension JSONTape {
  /// Decodes the array at `array`, the value of `decoder`'s member `key`, as envelopes, with the coding path
  /// an `Array`'s `init(from:)` would give each, noting their ids in `order`.
  fileprivate func decodeEnvelopes<Payload: EventPayload>(
    at array: UInt32,
    key: some CodingKey,
    decoder: JSONTapeDecoder,
    order: inout EnvelopeIDOrder
  ) throws -> [EventEnvelope<Payload>] {
    let capacity = self[array].kind == .array ? Int(self[array].count) : 0
    guard capacity > 0, StoredEnvelope.hasEnvelopeLayout(Payload.self) else {
      var envelopes: [EventEnvelope<Payload>] = []
      envelopes.reserveCapacity(capacity)
      try decodeEnvelopes(of: Payload.self, at: array, key: key, decoder: decoder, order: &order) {
        envelopes.append(
          EventEnvelope(id: $0.id, storage: $0.storage, origin: $0.origin)
        )
      }
      return envelopes
    }
    // Written in place into the array's storage, through the envelope's layout without its payload type: an
    // append ran the array's unspecialised code, with its look-ups of the element type, per envelope.
    return try [EventEnvelope<Payload>](unsafeUninitializedCapacity: capacity) { buffer, count in
      try buffer.withMemoryRebound(to: StoredEnvelope.self) { buffer in
        try decodeEnvelopes(of: Payload.self, at: array, key: key, decoder: decoder, order: &order) {
          (envelope: StoredEnvelope) in
          buffer.initializeElement(at: count, to: envelope)
          count += 1
        }
      }
    }
  }

  /// Decodes the array at `array` as envelopes of `Payload`, handing each to `add` in order.
  private func decodeEnvelopes<Payload: EventPayload>(
    of _: Payload.Type,
    at array: UInt32,
    key: some CodingKey,
    decoder: JSONTapeDecoder,
    order: inout EnvelopeIDOrder,
    add: (StoredEnvelope) -> Void
  ) throws {
    var types = EnvelopeTypes(known: Payload.knownEventTypes, readPayload: reader(of: Payload.self))
    try forEachElement(of: array, key: key, decoder: decoder) { element, depth in
      let envelope = try EventEnvelope<Payload>.stored(tape: self, at: element, depth: depth, types: &types)
      order.note(envelope.id)
      add(envelope)
    }
  }
}

/// The ids of a batch's envelopes in the order they are read: the first one that does not increase is kept,
/// with the one before it, for the error that refuses the batch once it is read.
struct EnvelopeIDOrder {
  private var previous: Int?
  /// The first id that did not increase, after the one before it.
  private(set) var firstDisorder: (previous: Int, next: Int)?

  mutating func note(_ id: Int) {
    if let previous, id <= previous, firstDisorder == nil {
      firstDisorder = (previous, id)
    }
    previous = id
  }
}

/// What the envelopes' `type`s make of them, the last one remembered: a batch's events are mostly of one or a
/// few types, so most envelopes need neither their type's text nor a lookup in the payload's known types.
struct EnvelopeTypes<Payload: EventPayload> {
  /// The payload's `knownEventTypes`, read once per batch.
  let known: Set<String>
  /// How the batch's payloads are read (through their fields or their `Codable`), decided once per batch.
  let readPayload: (JSONTapeDecoder) throws -> Payload
  /// The type of the envelopes' contents, looked up once per batch: code not specialised for the payload
  /// looks a generic class up each time it names one.
  let contentType = EventContent<Payload>.self
  /// The last type seen, and whether its envelope carries a payload.
  var last: (type: String, isPayload: Bool)?
}

extension JSONTapeDecoder {
  /// Decodes an ``EventEnvelope`` from the object this decoder is on (an envelope decoded alone, outside a
  /// poll's answer).
  func decodeEnvelope<Payload: EventPayload>() throws -> EventEnvelope<Payload> {
    var types = EnvelopeTypes(known: Payload.knownEventTypes, readPayload: tape.reader(of: Payload.self))
    let envelope = try EventEnvelope<Payload>.stored(tape: tape, at: index, depth: depth, types: &types)
    return EventEnvelope(
      id: envelope.id,
      storage: envelope.storage,
      origin: envelope.origin
    )
  }
}

extension EventEnvelope {
  /// Decodes the envelope at `object`, whose coding path is the tape's first `depth` keys.
  static func stored(
    tape: JSONTape,
    at object: UInt32,
    depth: Int,
    types: inout EnvelopeTypes<Payload>
  ) throws -> StoredEnvelope {
    let decoder = JSONTapeDecoder(tape: tape, index: object, depth: depth)
    let members = try tape.envelopeMembers(of: object, path: decoder.codingPath)
    var origin: MutationOrigin?
    if let originIndex = members.origin {
      origin = try tape.decodeValue(
        MutationOrigin.self,
        at: originIndex,
        key: EnvelopeCodingKeys.origin,
        decoder: decoder
      )
    }
    guard let typeIndex = members.type else {
      throw JSONTape.keyNotFound(EnvelopeCodingKeys.type, path: decoder.codingPath)
    }
    let type: String
    let isPayload: Bool
    if let last = types.last, tape[typeIndex].kind == .string, tape.string(at: typeIndex, equals: last.type) {
      (type, isPayload) = last
    } else {
      type = try tape.decodeString(at: typeIndex, path: decoder.codingPath + [EnvelopeCodingKeys.type])
      isPayload =
        type != EventBody<Payload>.heartbeatType && type != EventBody<Payload>.restartType
        && types.known.contains(type)
      types.last = (type, isPayload)
    }
    let storage: EventContentStorage
    if isPayload {
      let entry = tape[object]
      storage = types.contentType.init(
        payload: try types.readPayload(decoder),
        kept: .arrived(ArrivedEnvelope(answer: tape.bytes, start: entry.start, end: entry.end)),
        encodedType: ""
      )
    } else {
      switch type {
      case EventBody<Payload>.heartbeatType: storage = MarkerContent.heartbeat
      case EventBody<Payload>.restartType: storage = MarkerContent.restart
      default: storage = MarkerContent(.unknown(type: type))
      }
    }
    return StoredEnvelope(
      id: members.id,
      storage: storage,
      origin: origin
    )
  }
}

extension JSONValueEncoder {
  /// Writes `reply` as this value: the members `EventsReply.encode(to:)` writes, in the same order, or in
  /// key order when the output sorts keys.
  ///
  /// In key order (`events`, `msg`, `queue_id`, `result`) the object closes as written. In `encode(to:)`'s
  /// order, closing it sorted its members by copying them out and back whole, the events included: 12 % of
  /// a 100,000-event answer's encode, most of it on pages touched for the first time.
  func encodeEventsReply<Payload: EventPayload>(_ reply: EventsReply<Payload>) throws {
    let serial = output.beginObject(at: depth)
    func result() throws {
      try output.beginMember(EventsReplyCodingKeys.result.stringValue, at: depth, serial: serial)
      output.write("success")
    }
    func message() throws {
      try output.beginMember(EventsReplyCodingKeys.message.stringValue, at: depth, serial: serial)
      output.write("")
    }
    func events() throws { try encodeEnvelopes(reply.events, member: EventsReplyCodingKeys.events, serial: serial) }
    func queueID() throws {
      guard let queueID = reply.queueID else { return }
      try output.beginMember(EventsReplyCodingKeys.queueID.stringValue, at: depth, serial: serial)
      try output.encodeValue(queueID, key: EventsReplyCodingKeys.queueID)
    }
    if output.sortsKeys {
      try events()
      try message()
      try queueID()
      try result()
    } else {
      try result()
      try message()
      try events()
      try queueID()
    }
  }

  /// Writes `events` as the member `key` of the object `serial` this encoder is writing, each envelope as
  /// ``encodeEnvelope(_:asWholeValue:)`` writes it alone. How payloads are written is decided once for the
  /// batch, and each envelope is read through the payload-free layout: one with kept members that merge in
  /// key order (a poll's answer) is written with no look-up of the payload type.
  /// - Parameter copyingArrived: Whether an envelope decoded from a poll's answer is copied as it arrived
  ///   (its members in the order they came, with the `id` and `origin` it came with, whatever the envelope
  ///   says now) instead of encoded: a journal entry's, whose replay reads payloads only. Not when sorting
  ///   keys.
  package func encodeEnvelopes<Payload: EventPayload>(
    _ events: [EventEnvelope<Payload>],
    member key: some CodingKey,
    serial: UInt32,
    copyingArrived: Bool = false
  ) throws {
    let copiesArrived = copyingArrived && !output.sortsKeys
    let writePayload = writer(of: Payload.self)
    guard StoredEnvelope.hasEnvelopeLayout(Payload.self) else {
      try output.writeArrayMember(key, at: depth, serial: serial, count: events.count) { position, encoder in
        try encoder.encodeEnvelope(events[position], asWholeValue: true, writePayload: writePayload)
      }
      return
    }
    let output = output
    try events.withUnsafeBufferPointer { typed in
      try typed.withMemoryRebound(to: StoredEnvelope.self) { envelopes in
        try output.writeArrayMember(key, at: depth, serial: serial, count: envelopes.count) { position in
          // Most envelopes are copies: as they arrived, or their kept members with the envelope's own.
          let stored = envelopes[position]
          if copiesArrived, let arrived = stored.storage.arrived {
            arrived.answer.withUnsafeBufferPointer { answer in
              output.bytes.append(
                contentsOf: UnsafeBufferPointer(rebasing: answer[Int(arrived.start)..<Int(arrived.end)])
              )
            }
            return true
          }
          guard stored.origin == nil, let encoded = stored.storage.encodedPayload else { return false }
          return output.writePlainEnvelope(encoded, id: stored.id, type: stored.storage.encodedType)
        } _: { position, encoder in
          let stored = envelopes[position]
          if try !encoder.writeKeptEnvelope(stored) {
            // Not as a whole value: that would try the kept members' merge again, which just declined.
            try encoder.encodeEnvelope(
              EventEnvelope<Payload>(id: stored.id, storage: stored.storage, origin: stored.origin),
              asWholeValue: false,
              writePayload: writePayload
            )
          }
        }
      }
    }
  }

  /// Writes `envelope` whole, as this value, when it has kept members: merged with its own in key order when
  /// the output sorts keys (and they can be), else after them (the content's base class holds the members and
  /// the event's type, so nothing here depends on the payload).
  /// - Returns: Whether it did; nothing is written when it did not.
  private func writeKeptEnvelope(_ envelope: StoredEnvelope) throws -> Bool {
    guard let encoded = envelope.storage.encodedPayload else { return false }
    let type = envelope.storage.encodedType
    if output.sortsKeys {
      guard try output.writeEnvelope(encoded, id: envelope.id, type: type, origin: envelope.origin) else {
        return false
      }
    } else {
      try output.writeEnvelopeUnsorted(encoded, id: envelope.id, type: type, origin: envelope.origin)
    }
    try output.beginSingleValue(at: depth)
    return true
  }

  /// Writes `envelope` as this value: the payload's members (spliced when the size check kept them), then
  /// `id`, `type` and `origin`, as `EventEnvelope`'s `Codable` path writes them.
  /// - Parameter asWholeValue: Whether nothing else is written into this value, so that an envelope with kept
  ///   bytes can be written whole, its keys merged in order, and the value closed (a poll's answer). An
  ///   envelope encoded through its own `encode(to:)` is left an open object, as `Codable` leaves it.
  ///   - writePayload: How the batch's payloads are written (``JSONValueEncoder/writer(of:)``); `nil` for an
  ///     envelope written alone.
  func encodeEnvelope<Payload: EventPayload>(
    _ envelope: EventEnvelope<Payload>,
    asWholeValue: Bool,
    writePayload: ((JSONValueEncoder, Payload) throws -> Void)? = nil
  ) throws {
    if asWholeValue,
      try writeKeptEnvelope(StoredEnvelope(id: envelope.id, storage: envelope.storage, origin: envelope.origin))
    {
      return
    }
    let type: String
    if let encoded = envelope.storage.encodedPayload {
      // Only a payload's members are kept, with its type.
      try splice(encoded)
      type = envelope.storage.encodedType
    } else if let payload = envelope.payload {
      if let writePayload { try writePayload(self, payload) } else { try encode(payload) }
      type = payload.eventType
    } else {
      type = envelope.body.type
    }
    let serial = output.beginObject(at: depth)
    try output.beginMember(EnvelopeCodingKeys.id.stringValue, at: depth, serial: serial)
    output.write(Int64(envelope.id))
    try output.beginMember(EnvelopeCodingKeys.type.stringValue, at: depth, serial: serial)
    output.write(type)
    if let origin = envelope.origin {
      try output.beginMember(EnvelopeCodingKeys.origin.stringValue, at: depth, serial: serial)
      try output.encodeValue(origin, key: EnvelopeCodingKeys.origin)
    }
  }
}
