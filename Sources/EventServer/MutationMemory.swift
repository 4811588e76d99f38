import EventProtocol

/// What the server remembers of each client's mutations, so a retried write is applied at most once and a
/// reused mutation id is recognised.
///
/// For each (user, client) it keeps the last ``EventServerConfiguration/mutationWindow`` decisions (id,
/// digest of the write, rejection reason) and when the client was last seen. It is bounded three ways:
/// client ids longer than `ClientID/maximumLength` are refused before they get here; each user keeps at
/// most ``EventServerConfiguration/maximumClientsPerUser`` clients (the least recently seen is forgotten);
/// and a client silent for ``EventServerConfiguration/mutationMemoryLifetime`` is forgotten by the sweep.
///
/// ```swift
/// var memory = MutationMemory()
/// let verdict = memory.verdict(for: source, mutationID: MutationID(1), digest: digest)   // .new
/// ```
public struct MutationMemory: Sendable, Equatable {
  /// How a mutation relates to what the server remembers of its client.
  public enum Verdict: Sendable, Equatable {
    /// Newer than anything decided for the client: apply it.
    case new
    /// A repeat of a mutation that was applied: acknowledge again, apply nothing.
    case repeatOfApplied
    /// A repeat of a mutation that was refused: refuse again with the same reason.
    case repeatOfRejected(String)
    /// An id already decided for a different write, or older than what is remembered: refuse loudly.
    case reused
  }

  /// What one client's memory holds.
  public struct ClientMemory: Sendable, Hashable, Codable {
    /// When the client last sent a mutation.
    public var lastSeen: Timestamp
    /// The latest decisions, in increasing id order.
    public var decisions: [MutationDecision]

    /// Creates a ClientMemory from its parts.
    public init(lastSeen: Timestamp, decisions: [MutationDecision]) {
      self.lastSeen = lastSeen
      self.decisions = decisions
    }
  }

  private var clients: [UserID: [ClientID: ClientMemory]] = [:]

  /// An empty memory.
  public init() {}

  /// How many clients are remembered, over all users.
  /// - Complexity: O(*u*) in the users.
  public var clientCount: Int { clients.values.reduce(0) { $0 + $1.count } }

  /// The memory of one client, if any.
  public func memory(of source: MutationSource) -> ClientMemory? {
    clients[source.user]?[source.clientID]
  }

  /// How mutation `mutationID` with content `digest` relates to what `source` already sent.
  /// - Complexity: O(*w*) in the window.
  public func verdict(for source: MutationSource, mutationID: MutationID, digest: MutationDigest) -> Verdict {
    guard let memory = memory(of: source), let last = memory.decisions.last, mutationID <= last.mutationID else {
      return .new
    }
    guard let decision = memory.decisions.last(where: { $0.mutationID == mutationID }) else { return .reused }
    if let known = decision.digest, known != digest { return .reused }
    if let rejection = decision.rejection { return .repeatOfRejected(rejection) }
    return .repeatOfApplied
  }

  /// Records a decision, keeping the newest `window` decisions of the client and at most `maximumClients`
  /// clients for its user (forgetting the least recently seen).
  public mutating func record(
    _ decision: MutationDecision,
    for source: MutationSource,
    now: Timestamp,
    window: Int,
    maximumClients: Int
  ) {
    var userClients = clients[source.user] ?? [:]
    var memory = userClients[source.clientID] ?? ClientMemory(lastSeen: now, decisions: [])
    memory.lastSeen = now
    memory.decisions.append(decision)
    if memory.decisions.count > max(window, 1) { memory.decisions.removeFirst(memory.decisions.count - max(window, 1)) }
    userClients[source.clientID] = memory
    while userClients.count > max(maximumClients, 1) {
      let oldest = userClients.min { ($0.value.lastSeen, $0.key.rawValue) < ($1.value.lastSeen, $1.key.rawValue) }!
      userClients[oldest.key] = nil
    }
    clients[source.user] = userClients
  }

  /// Notes that `source` was seen at `now` (a repeat keeps its memory alive).
  public mutating func touch(_ source: MutationSource, now: Timestamp) {
    clients[source.user]?[source.clientID]?.lastSeen = now
  }

  /// Forgets every client last seen before `cutoff`.
  /// - Complexity: O(*c*) in the clients remembered.
  public mutating func forget(seenBefore cutoff: Timestamp) {
    for user in clients.keys {
      clients[user] = clients[user]!.filter { $0.value.lastSeen >= cutoff }
      if clients[user]!.isEmpty { clients[user] = nil }
    }
  }

  /// The memory as dump records, sorted by source.
  public var records: [MutationRecord] {
    clients.flatMap { user, userClients in
      userClients.map { clientID, memory in
        MutationRecord(source: MutationSource(user: user, clientID: clientID), memory: memory)
      }
    }
    .sorted { $0.source < $1.source }
  }

  /// A memory holding `records`.
  public init(records: [MutationRecord]) {
    for record in records {
      clients[record.source.user, default: [:]][record.source.clientID] = record.memory
    }
  }
}
