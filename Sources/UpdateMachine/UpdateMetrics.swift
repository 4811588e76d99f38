/// Counters an update machine keeps, for dashboards and the simulation's figures.
public struct UpdateMetrics: Hashable, Sendable, Codable {
  /// Register requests sent.
  public var registers = 0
  /// Poll requests sent.
  public var polls = 0
  /// Mutation requests sent.
  public var submits = 0
  /// Application events applied.
  public var eventsApplied = 0
  /// Failed requests.
  public var failures = 0
  /// Push hints received.
  public var pushHints = 0
  /// Push hints naming an event the machine already had (the poll beat the push).
  public var pushHintsLate = 0
  /// Push hints that arrived while a request that would fetch the event was already under way.
  public var pushHintsRedundant = 0
  /// Times the outbox took a new client id because the server said its mutation ids were reused (a
  /// restored backup shared by two installations, or a counter that went backwards).
  public var clientIDResets = 0
  /// Pushes whose events were applied with no request at all.
  public var pushesApplied = 0
  /// Fetch requests sent for pages of partial state.
  public var fetches = 0
  /// Events applied to a fetched page to bring it up to the finger (they were already in the state).
  public var eventsReplayedOnPages = 0

  /// Creates counters that are all zero.
  public init() {}
}
