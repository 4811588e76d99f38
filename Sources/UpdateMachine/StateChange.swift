import EventProtocol

/// How the confirmed state changed since the previous `.persist` action: what a
/// ``JournalingUpdateStore`` appends instead of rewriting the whole record.
///
/// A catch-up applies thousands of events in batches; re-encoding a large state after each batch would cost
/// in proportion to the state, not to the batch. With the events of each batch, the shell appends a small
/// journal entry, and writes the whole record again only now and then.
public enum StateChange<Event: EventPayload>: Equatable, Sendable {
  /// Only these events were applied to the state (possibly none: the rest of the record changed).
  case applied(AppliedEvents<Event>)
  /// The state was replaced (loaded, registered, or a save failed and the journal may lack a change): only a
  /// whole record describes it.
  case replaced

  /// Makes this the change after `events` were applied on top of it. After a save (no events yet) it shares
  /// `events`' array; otherwise it appends to its own without copying it first.
  mutating func append(_ events: AppliedEvents<Event>) {
    guard case .applied(var earlier) = self else { return }
    if earlier.envelopes.isEmpty {
      self = .applied(events)
      return
    }
    self = .replaced  // lets go of `earlier`'s array, so that appending to it does not copy it
    earlier.envelopes.append(contentsOf: events.envelopes)
    self = .applied(earlier)
  }
}

/// The events applied to the confirmed state since the last save, in order: a collection of their payloads.
///
/// Each keeps the envelope it arrived in, so that a journal entry can copy the bytes the event was kept
/// with instead of encoding the payload again: the payload's encoding the server's size check made (in
/// process), or the envelope object as it came in a poll's answer (through JSON). The latter are the
/// answer's own bytes, shared by all its events: holding these events keeps that answer in memory. Two are
/// equal when their payloads are.
public struct AppliedEvents<Event: EventPayload>: RandomAccessCollection, ExpressibleByArrayLiteral, Equatable,
  Sendable
{
  /// The envelopes the payloads arrived in, each with a body of `.payload`.
  package var envelopes: [EventEnvelope<Event>]

  /// The events `payloads`, in order.
  public init(_ payloads: [Event]) {
    envelopes = payloads.enumerated().map { EventEnvelope(id: $0.offset, body: .payload($0.element)) }
  }

  public init(arrayLiteral payloads: Event...) {
    self.init(payloads)
  }

  /// The payloads of `envelopes`, each of which must have a body of `.payload`.
  package init(envelopes: [EventEnvelope<Event>]) {
    self.envelopes = envelopes
  }

  public var startIndex: Int { envelopes.startIndex }
  public var endIndex: Int { envelopes.endIndex }

  public subscript(position: Int) -> Event {
    guard case .payload(let payload) = envelopes[position].body else {
      preconditionFailure("an applied event has no payload")
    }
    return payload
  }

  public static func == (lhs: Self, rhs: Self) -> Bool { lhs.elementsEqual(rhs) }
}
