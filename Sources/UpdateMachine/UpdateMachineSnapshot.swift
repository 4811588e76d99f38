import EventProtocol

/// Everything an app's UI needs from an ``UpdateMachine`` at one moment.
///
/// For a banner or an "as of" label, read ``freshness``; ``phase`` says what the engine does next and is
/// meant for logs and tests.
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
  /// The current save failure, if saves are failing (the old file is intact); cleared by the next success.
  public var persistenceIssue: PersistenceError?
  /// What reading the persisted record at start had to do: a file set aside (with the number of writes
  /// stranded in it), a state migrated or discarded.
  public var storeRecovery: [StoreRecovery]

  /// Creates a snapshot, for previews and tests.
  /// Whether the confirmed state came from the server during this session (a register or a poll succeeded
  /// since launch, and the queue has not been lost since): what work that must never start from stale
  /// persisted state waits for (see ``UpdateMachineCore/isConfirmedThisSession``).
  public var isConfirmedThisSession: Bool
  /// The fetches of partial state under way, each with where it stands (waiting for a queue, loading,
  /// retrying after a failure, waiting for the events): what a list's "loading" and "retrying" rows show.
  public var fetches: [FetchStatus]

  /// A snapshot with these parts (for previews and tests; the machine makes its own).
  public init(
    state: State?,
    confirmedState: State?,
    phase: Phase,
    freshness: FreshnessReport,
    pendingMutations: [OutboxEntry<Mutation>] = [],
    rejectedMutations: [RejectedMutation<Mutation>] = [],
    metrics: UpdateMetrics = UpdateMetrics(),
    persistenceIssue: PersistenceError? = nil,
    storeRecovery: [StoreRecovery] = [],
    isConfirmedThisSession: Bool = false,
    fetches: [FetchStatus] = []
  ) {
    self.state = state
    self.confirmedState = confirmedState
    self.phase = phase
    self.freshness = freshness
    self.pendingMutations = pendingMutations
    self.rejectedMutations = rejectedMutations
    self.metrics = metrics
    self.persistenceIssue = persistenceIssue
    self.storeRecovery = storeRecovery
    self.isConfirmedThisSession = isConfirmedThisSession
    self.fetches = fetches
  }

  /// Why the machine stopped, when it did (call `resume()` once the cause is fixed).
  public var stopReason: StopReason? {
    if case .stopped(let reason, _) = phase { reason } else { nil }
  }
}
