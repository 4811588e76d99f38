import EventProtocol

/// Everything an app's UI needs from an ``UpdateMachine`` at one moment.
public struct UpdateMachineSnapshot<State: Codable & Sendable & Equatable, Mutation: Codable & Sendable & Equatable>:
  Equatable, Sendable
{
  /// The state to show: confirmed state plus the optimistic effect of pending mutations; `nil` until loaded.
  public var state: State?
  /// The state as the server confirmed it.
  public var confirmedState: State?
  /// The machine's phase.
  public var phase: Phase
  /// How current the data is, for a banner or an "as of" label.
  public var freshness: FreshnessReport
  /// Mutations not yet confirmed by the server's events, oldest first ("sending…").
  public var pendingMutations: [OutboxEntry<Mutation>]
  /// Mutations the server refused.
  public var rejectedMutations: [RejectedMutation<Mutation>]
  /// Counters.
  public var metrics: UpdateMetrics
  /// The last problem with the persisted file, if any (set aside at start, or a failed write).
  public var persistenceIssue: PersistenceError?
}
