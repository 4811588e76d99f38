import EventProtocol

/// How the confirmed state changed since the previous `.persist` action: what a
/// ``JournalingUpdateStore`` appends instead of rewriting the whole record.
///
/// A catch-up applies thousands of events in batches; re-encoding a large state after each batch would cost
/// in proportion to the state, not to the batch. With the events of each batch, the shell appends a small
/// journal entry, and writes the whole record again only now and then.
public enum StateChange<Event: EventPayload>: Equatable, Sendable {
  /// Only these events were applied to the state (possibly none: the rest of the record changed).
  case applied([Event])
  /// The state was replaced (loaded, registered, or a save failed and the journal may lack a change): only a
  /// whole record describes it.
  case replaced

  /// The change after `events` were applied on top of this one.
  func appending(_ events: [Event]) -> StateChange {
    switch self {
    case .applied(let earlier): .applied(earlier + events)
    case .replaced: .replaced
    }
  }
}
