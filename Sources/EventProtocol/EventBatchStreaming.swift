import JSONCoding

/// The envelopes of a poll's answer, decoded as the body is parsed (``JSONArrayStreamer``): the body's tape
/// then holds one envelope at a time instead of all of them.
///
/// Each envelope is decoded as `decodeEnvelopes` decodes an element of the array (same coding paths, same
/// errors), and kept through the envelope's payload-free layout. The first failure stops the decoding and
/// is thrown by ``takeEvents()``, which `decodeEventsReply` calls where it would have decoded the array.
final class StreamedEnvelopes<Payload: EventPayload>: JSONArrayStreamer {
  var member: any CodingKey { EventsReplyCodingKeys.events }
  // `@exclusivity(unchecked)`: a streamer is not `Sendable` and is used by the one parse that made it, on
  // one thread, and no access to these properties spans another (the envelope's decoding takes `types`
  // in and out, and nothing it calls can reach this streamer). The checks were 3 % of a poll's decode.
  /// The envelopes' ids so far, and the first that did not increase.
  @exclusivity(unchecked) private(set) var order = EnvelopeIDOrder()
  @exclusivity(unchecked) private var types: EnvelopeTypes<Payload>?
  @exclusivity(unchecked) private var failure: (any Error)?
  /// The envelopes so far, in storage this streamer owns: moved, not copied, into the events' array.
  @exclusivity(unchecked) private var stored: UnsafeMutablePointer<StoredEnvelope>?
  @exclusivity(unchecked) private var count = 0
  @exclusivity(unchecked) private var capacity = 0

  deinit {
    stored?.deinitialize(count: count)
    stored?.deallocate()
  }

  func decodeElement(_ decoder: JSONTapeDecoder) -> Bool {
    do {
      if types == nil {
        types = EnvelopeTypes(known: Payload.knownEventTypes, readPayload: decoder.tape.reader(of: Payload.self))
      }
      let envelope = try EventEnvelope<Payload>.stored(
        tape: decoder.tape,
        at: decoder.index,
        depth: decoder.depth,
        types: &types!
      )
      order.note(envelope.id)
      append(envelope)
      return true
    } catch {
      failure = error
      return false
    }
  }

  /// The envelopes decoded, moved out of this streamer.
  /// - Throws: The first envelope's decoding error.
  func takeEvents() throws -> [EventEnvelope<Payload>] {
    if let failure { throw failure }
    guard let stored, count > 0 else { return [] }
    let taken = count
    count = 0
    guard StoredEnvelope.hasEnvelopeLayout(Payload.self) else {
      defer { stored.deinitialize(count: taken) }
      return (0..<taken).map {
        EventEnvelope(id: stored[$0].id, storage: stored[$0].storage, origin: stored[$0].origin)
      }
    }
    return [EventEnvelope<Payload>](unsafeUninitializedCapacity: taken) { buffer, initialized in
      buffer.withMemoryRebound(to: StoredEnvelope.self) { buffer in
        buffer.baseAddress!.moveInitialize(from: stored, count: taken)
      }
      initialized = taken
    }
  }

  private func append(_ envelope: StoredEnvelope) {
    if count == capacity {
      let grown = UnsafeMutablePointer<StoredEnvelope>.allocate(capacity: max(1024, capacity * 2))
      if let stored {
        grown.moveInitialize(from: stored, count: count)
        stored.deallocate()
      }
      stored = grown
      capacity = max(1024, capacity * 2)
    }
    (stored! + count).initialize(to: envelope)
    count += 1
  }
}

/// A reply whose events are decoded as its body is parsed (``WireFormat``'s decoding of an ``EventsReply``).
protocol StreamsEvents {
  /// A new streamer of the reply's `events`.
  static func eventsStreamer() -> any JSONArrayStreamer
}

extension EventsReply: StreamsEvents {
  static func eventsStreamer() -> any JSONArrayStreamer { StreamedEnvelopes<Payload>() }
}
