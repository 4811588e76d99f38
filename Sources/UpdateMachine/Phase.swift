import EventProtocol

/// Where an update machine is in keeping its state live. A finger exists exactly in ``live(_:)``,
/// ``pollFailed(_:attempt:retryAt:)`` and ``idle(_:nextPollAt:)``; the enum makes other combinations
/// impossible to write.
public enum Phase: Hashable, Sendable, CustomStringConvertible {
  /// No finger and no request under way: the machine registers next.
  case stale
  /// A register request is under way; the old state stays visible until it succeeds.
  case registering
  /// The last register failed (or a protocol error made the finger useless); the next try is at `retryAt`.
  case registerFailed(attempt: Int, retryAt: Timestamp)
  /// In the foreground with a valid finger: long-polling.
  case live(EventFinger)
  /// The last poll failed; the same finger is retried at `retryAt`.
  case pollFailed(EventFinger, attempt: Int, retryAt: Timestamp)
  /// In the background with a valid finger: no long-poll; the next short poll is at `nextPollAt` (never if nil).
  case idle(EventFinger, nextPollAt: Timestamp?)
  /// Stopped for good (the credentials were refused); the state stays as it was.
  case terminated(reason: String)

  /// The finger, in the phases that hold one.
  public var finger: EventFinger? {
    switch self {
    case .live(let finger), .pollFailed(let finger, _, _), .idle(let finger, _): finger
    case .stale, .registering, .registerFailed, .terminated: nil
    }
  }

  public var description: String {
    switch self {
    case .stale: "stale"
    case .registering: "registering"
    case .registerFailed(let attempt, let retryAt): "registerFailed(#\(attempt), retry \(retryAt))"
    case .live(let finger): "live(\(finger))"
    case .pollFailed(let finger, let attempt, let retryAt): "pollFailed(\(finger), #\(attempt), retry \(retryAt))"
    case .idle(let finger, let nextPollAt): "idle(\(finger), next \(nextPollAt.map(\.description) ?? "never"))"
    case .terminated(let reason): "terminated(\(reason))"
    }
  }
}

/// Whether the app is in the foreground (long-poll) or the background (occasional polls).
public enum AppLifecycle: Hashable, Sendable {
  case foreground
  case background
}
