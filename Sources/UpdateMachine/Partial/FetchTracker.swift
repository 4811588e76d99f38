import EventProtocol

/// How a fetch ended, reported to the app by the core's `.fetchFinished` action.
public enum FetchOutcome: Equatable, Sendable {
  /// The page was brought up to the finger and merged into the state.
  case merged
  /// The fetch failed; nothing was merged.
  case failed(TransportError)
}

/// The fetches under way and the pages waiting for the finger, with the events applied since the oldest of
/// them was read: what brings each page to the finger exactly once.
///
/// A page read at event id `E` reflects every event up to `E`. When it arrives with the finger at `F`:
/// - `E ≤ F`: the events in `(E, F]` are already in the state but not in the page; they are applied to the
///   page alone, then the page is merged.
/// - `E > F`: the page is ahead; it is held until the finger reaches `E`, then treated as above.
/// The events kept are exactly those after the finger at which the oldest fetch still open was sent
/// (a page's `E` is never below it: the queue held those events when the page was read).
struct FetchTracker<Event: EventPayload>: Sendable {
  struct Sent: Sendable {
    var request: FetchRequest
    var queueID: QueueID
    /// The finger's event id when the fetch was sent.
    var sentAfter: Int
    var deadline: Timestamp
  }

  struct Waiting: Sendable {
    var id: RequestID
    var request: FetchRequest
    /// A queue known to be gone: wait for another.
    var notOn: QueueID?
  }

  struct Held: Sendable {
    var id: RequestID
    var request: FetchRequest
    var lastEventID: Int
    var answer: any Sendable
  }

  /// Fetches asked for with no queue to read against yet.
  var waiting: [Waiting] = []
  var sent: [RequestID: Sent] = [:]
  var held: [Held] = []
  /// Events applied while any fetch is sent or held, oldest first.
  var applied: [(id: Int, event: Event)] = []

  var isTracking: Bool { !sent.isEmpty || !held.isEmpty }

  /// Records events just applied, if a page may need them.
  mutating func record(ids: [Int], events: [Event]) {
    guard isTracking else { return }
    for (id, event) in zip(ids, events) { applied.append((id, event)) }
  }

  /// The events after `eventID` through `finger`, in order.
  func events(after eventID: Int, through finger: Int) -> [Event] {
    applied.lazy.filter { $0.id > eventID && $0.id <= finger }.map(\.event)
  }

  /// Drops the events no open fetch can need.
  mutating func prune() {
    guard isTracking else {
      applied = []
      return
    }
    let floor = min(sent.values.map(\.sentAfter).min() ?? .max, held.map(\.lastEventID).min() ?? .max)
    if let keepFrom = applied.firstIndex(where: { $0.id > floor }) {
      applied.removeFirst(keepFrom)
    } else {
      applied = []
    }
  }

  /// The earliest deadline of a fetch under way.
  /// (A loop rather than `map(\.deadline).min()`: the engine asks at every step, and a key path applied
  /// through the generic runtime cost the simulation 8% of its time.)
  var nextDeadline: Timestamp? {
    guard !sent.isEmpty else { return nil }
    var earliest: Timestamp?
    for fetch in sent.values where earliest.map({ fetch.deadline < $0 }) ?? true { earliest = fetch.deadline }
    return earliest
  }
}
