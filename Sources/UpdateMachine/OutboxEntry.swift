import EventProtocol

/// A write waiting in the outbox: persisted before it is first sent, retried until acknowledged, and kept
/// (for its optimistic effect) until the events stream shows its effect.
public struct OutboxEntry<Mutation: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
  /// The client-chosen id; the server applies it at most once.
  public let id: MutationID
  /// What to do.
  public let mutation: Mutation
  /// When the app submitted it.
  public let submittedAt: Timestamp
  /// How many times it has been sent.
  public internal(set) var attempts: Int
  /// The server's acknowledgement, once received; the entry then waits for its effect to arrive.
  public internal(set) var receipt: MutationReceipt?

  /// Whether the server has acknowledged it (it is then only waiting for its event).
  public var isAcknowledged: Bool { receipt != nil }
}

/// A mutation the server refused (`BAD_REQUEST`): dropped from the outbox and reported to the app.
public struct RejectedMutation<Mutation: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
  /// The refused mutation's id.
  public let id: MutationID
  /// The refused mutation.
  public let mutation: Mutation
  /// The server's reason.
  public let reason: String
}
