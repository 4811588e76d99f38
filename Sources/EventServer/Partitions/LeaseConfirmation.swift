/// How long a node may go on serving the partitions it leases on the strength of its lease session's last
/// answer: the node's side of a lease, which must end before the database's side can.
///
/// The database releases a session's leases when it finds the session dead: with `tcp_user_timeout` set,
/// no sooner than that long after it sent an answer the node did not acknowledge (and with keepalives, after
/// a longer silence). Every answer the node receives was sent after the node asked, so the database's side
/// lasts at least `tcp_user_timeout` from the moment the node sent its last answered request. A node that
/// stops serving a lease at that moment plus ``bound``, with ``bound`` shorter than `tcp_user_timeout`, has
/// stopped before any other node can take the lease: a cut network never leaves two nodes serving one
/// partition, as far as the node's clock can tell.
///
/// A pure value over any clock's instants; the session's shell records each answer
/// (``answered(askedAt:)``) and asks ``holds(at:)`` before it routes a request to a partition's node.
///
/// ```swift
/// var confirmation = LeaseConfirmation<ContinuousClock.Instant>(bound: .seconds(4))
/// let asked = ContinuousClock.now
/// // … the session answers a request sent at `asked` …
/// confirmation.answered(askedAt: asked)
/// confirmation.holds(at: asked.advanced(by: .seconds(3)))  // true
/// confirmation.holds(at: asked.advanced(by: .seconds(4)))  // false
/// ```
public struct LeaseConfirmation<Instant: InstantProtocol & Sendable>: Sendable, Equatable
where Instant.Duration == Duration {
  /// How long after the node sent its last answered request its leases still hold, as far as it serves.
  public let bound: Duration
  /// When the node sent the last request its session answered; `nil` before the first answer and once the
  /// session was lost.
  public private(set) var confirmedAsOf: Instant?

  /// A confirmation with nothing answered yet: the leases do not hold until the session answers.
  /// - Parameter bound: How long an answer confirms the leases; shorter than the database's
  ///   `tcp_user_timeout`.
  public init(bound: Duration) {
    self.bound = bound
  }

  /// The session answered a request the node sent at `askedAt` (answers that arrive out of order never
  /// move the confirmation back).
  public mutating func answered(askedAt: Instant) {
    if let confirmedAsOf, confirmedAsOf >= askedAt { return }
    confirmedAsOf = askedAt
  }

  /// The session ended or was given up: nothing is confirmed until a new one answers.
  public mutating func lost() {
    confirmedAsOf = nil
  }

  /// When the leases stop holding, unless the session answers again; `nil` when they do not hold now.
  public var expiry: Instant? { confirmedAsOf?.advanced(by: bound) }

  /// Whether the node may serve its leased partitions at `now`.
  public func holds(at now: Instant) -> Bool {
    guard let expiry else { return false }
    return now < expiry
  }
}
