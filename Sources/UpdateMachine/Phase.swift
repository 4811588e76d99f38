import EventProtocol

/// Where an update machine is in keeping its state current: what it will do next. For what to *show*,
/// use ``FreshnessReport`` (``Freshness/live`` only once the server has answered since the last
/// disconnection): a phase holding a finger says nothing about whether the server is reachable.
///
/// A finger exists exactly in ``polling(_:)``, ``pollFailed(_:attempt:retryAt:)`` and
/// ``idle(_:nextPollAt:)`` (and is kept aside in ``stopped(_:finger:)``); the enum makes other
/// combinations impossible to write.
public enum Phase: Hashable, Sendable, CustomStringConvertible {
  /// No finger and no request under way: the machine registers next.
  case stale
  /// A register request is under way; the old state stays visible until it succeeds.
  case registering
  /// The last register failed (or a protocol error made the finger useless); the next try is at `retryAt`.
  case registerFailed(attempt: Int, retryAt: Timestamp)
  /// In the foreground with a finger: polling for the events after it (a first non-blocking poll after
  /// any disconnection, then long-polls). The server may not have answered yet.
  case polling(EventFinger)
  /// The last poll failed; the same finger is retried at `retryAt`.
  case pollFailed(EventFinger, attempt: Int, retryAt: Timestamp)
  /// In the background with a finger: no long-poll; the next short poll is at `nextPollAt` (never if nil).
  case idle(EventFinger, nextPollAt: Timestamp?)
  /// Stopped until the app calls `resume()` (the credentials were refused); the state, the outbox and the
  /// finger are kept.
  case stopped(StopReason, finger: EventFinger?)

  /// The finger, in the phases that poll with one.
  public var finger: EventFinger? {
    switch self {
    case .polling(let finger), .pollFailed(let finger, _, _), .idle(let finger, _): finger
    case .stale, .registering, .registerFailed, .stopped: nil
    }
  }

  /// The finger the machine holds, including one kept while stopped: what is persisted.
  public var heldFinger: EventFinger? {
    if case .stopped(_, let finger) = self { return finger }
    return finger
  }

  public var description: String {
    switch self {
    case .stale: "stale"
    case .registering: "registering"
    case .registerFailed(let attempt, let retryAt): "registerFailed(#\(attempt), retry \(retryAt))"
    case .polling(let finger): "polling(\(finger))"
    case .pollFailed(let finger, let attempt, let retryAt): "pollFailed(\(finger), #\(attempt), retry \(retryAt))"
    case .idle(let finger, let nextPollAt): "idle(\(finger), next \(nextPollAt.map(\.description) ?? "never"))"
    case .stopped(let reason, _): "stopped(\(reason))"
    }
  }
}

/// Why a machine stopped and waits for the app.
public enum StopReason: Hashable, Sendable, CustomStringConvertible {
  /// The server refused the credentials (`UNAUTHORIZED`). Refresh them in the transport, then call
  /// `resume()`.
  case unauthorized(message: String)
  /// The store is open in another process (an app extension and its app, two copies of a tool) or another
  /// machine in this one: this machine read nothing and will write nothing. Two engines on one record would
  /// each take the other's mutation ids and could apply a write twice. `resume()` does not clear it: stop
  /// the other user of the file, then create a new machine.
  case storeInUse(String)

  public var description: String {
    switch self {
    case .unauthorized(let message): "unauthorized: \(message)"
    case .storeInUse(let detail): "store in use: \(detail)"
    }
  }
}

/// Whether the app is in the foreground (long-poll) or the background (occasional polls).
public enum AppLifecycle: Hashable, Sendable {
  /// Visible: the machine long-polls.
  case foreground
  /// Not visible: the machine polls every background interval, or on a push.
  case background
}
