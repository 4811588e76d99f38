import EventProtocol

/// How a fetch ended, reported to the app by the core's `.fetchFinished` action.
public enum FetchOutcome: Equatable, Sendable {
  /// The page was brought up to the finger and merged into the state.
  case merged
  /// The fetch failed for good (a request the server refuses, a machine that stopped) or was cancelled;
  /// nothing was merged. Failures worth retrying (no connection, a timeout, a 5xx, a rate limit) are
  /// retried by the engine and never end a fetch.
  case failed(TransportError)
}

/// Where a fetch the app asked for stands (``UpdateMachineSnapshot/fetches``).
public enum FetchProgress: Equatable, Sendable {
  /// Waiting for a queue to read against (the machine is registering).
  case waitingForQueue
  /// Sent; `attempt` counts the tries (1 for the first).
  case loading(attempt: Int)
  /// The last try failed with `failure`; tried again at `retryAt` (or when the network comes back).
  case retrying(attempt: Int, failure: TransportError, retryAt: Timestamp)
  /// Answered, and held until the event stream reaches the event id it was read at.
  case waitingForEvents
}

/// A fetch under way, as the snapshot shows it.
public struct FetchStatus: Equatable, Sendable {
  /// The fetch's identity: ``UpdateMachine/requestFetch(_:)`` returned it, and identical requests share it.
  public var id: RequestID
  /// What was asked.
  public var request: FetchRequest
  /// Where it stands.
  public var progress: FetchProgress
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
    /// The tries so far, this one included.
    var attempt = 1
  }

  struct Waiting: Sendable {
    var id: RequestID
    var request: FetchRequest
    /// A queue known to be gone: wait for another.
    var notOn: QueueID?
    /// The tries that failed so far.
    var attempt = 0
    /// When to try again after a failure (`nil`: as soon as there is a queue).
    var retryAt: Timestamp?
    /// The last failure.
    var failure: TransportError?
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
  mutating func record(_ events: [EventEnvelope<Event>]) {
    guard isTracking else { return }
    for event in events {
      if case .payload(let payload) = event.body { applied.append((event.id, payload)) }
    }
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

  /// Whether `request` is asked for already (waiting, under way or held): its identity, if so.
  func outstanding(_ request: FetchRequest) -> RequestID? {
    if let waiting = waiting.first(where: { $0.request == request }) { return waiting.id }
    if let sent = sent.first(where: { $0.value.request == request }) { return sent.key }
    return held.first { $0.request == request }?.id
  }

  /// Every fetch under way, oldest identity first.
  var statuses: [FetchStatus] {
    var statuses: [FetchStatus] = []
    for fetch in waiting {
      let progress: FetchProgress =
        if let retryAt = fetch.retryAt, let failure = fetch.failure {
          .retrying(attempt: fetch.attempt, failure: failure, retryAt: retryAt)
        } else {
          .waitingForQueue
        }
      statuses.append(FetchStatus(id: fetch.id, request: fetch.request, progress: progress))
    }
    for (id, fetch) in sent {
      statuses.append(FetchStatus(id: id, request: fetch.request, progress: .loading(attempt: fetch.attempt)))
    }
    for fetch in held {
      statuses.append(FetchStatus(id: fetch.id, request: fetch.request, progress: .waitingForEvents))
    }
    return statuses.sorted { $0.id.rawValue < $1.id.rawValue }
  }

  /// The earliest retry of a fetch that failed.
  var nextRetry: Timestamp? {
    var earliest: Timestamp?
    for fetch in waiting {
      if let retryAt = fetch.retryAt, earliest.map({ retryAt < $0 }) ?? true { earliest = retryAt }
    }
    return earliest
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
