import EventProtocol

/// A write waiting in the outbox: persisted before it is first sent, retried until acknowledged, and kept
/// (for its optimistic effect) until the events stream shows its effect.
public struct OutboxEntry<Mutation: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
  /// The client-chosen id; the server applies it at most once.
  public internal(set) var id: MutationID
  /// What to do.
  public let mutation: Mutation
  /// When the app submitted it.
  public let submittedAt: Timestamp
  /// How many times it has been sent.
  public internal(set) var attempts: Int
  /// The server's acknowledgement, once received; the entry then waits for its effect to arrive.
  public internal(set) var receipt: MutationReceipt?
  /// The queue the machine held when it last sent the entry, if any: a receipt that does not name it says
  /// that queue had ended on the server (`MutationReceipt/isReflected(by:sentOn:)`).
  public internal(set) var sentOnQueue: QueueID?

  /// Creates an entry, for tests and previews; the engine makes its own with ``UpdateMachine/submit(_:)``.
  public init(
    id: MutationID,
    mutation: Mutation,
    submittedAt: Timestamp,
    attempts: Int = 0,
    receipt: MutationReceipt? = nil
  ) {
    self.id = id
    self.mutation = mutation
    self.submittedAt = submittedAt
    self.attempts = attempts
    self.receipt = receipt
  }

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

  /// Creates a RejectedMutation from its parts.
  public init(id: MutationID, mutation: Mutation, reason: String) {
    self.id = id
    self.mutation = mutation
    self.reason = reason
  }
}
