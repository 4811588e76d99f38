/// Several writes of one installation's outbox in one request, applied in order, each at most once.
///
/// On the wire (`POST /api/v1/mutation_batches`): `{"mutations": [{"client_id": "…", "mutation_id": 7,
/// "mutation": …}, …]}`. An outbox sends one client id with increasing ids. The server decides
/// each in order, exactly as it decides a single mutation (`POST /api/v1/mutations`), makes the decisions
/// durable together and answers one ``MutationOutcome`` per mutation decided. It stops after a
/// `MUTATION_ID_REUSED` (the client takes a new client id and renumbers what follows, so nothing after it
/// may be applied under the old one): fewer outcomes than mutations means the rest were not decided and
/// are sent again.
///
/// ```swift
/// let batch = MutationBatch(requests: [
///   MutationRequest(clientID: "c1", mutationID: MutationID(7), mutation: command7),
///   MutationRequest(clientID: "c1", mutationID: MutationID(8), mutation: command8),
/// ])
/// ```
public struct MutationBatch<Mutation: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
  /// The writes, in the order they are applied.
  public var requests: [MutationRequest<Mutation>]

  /// The most mutations a server accepts in one batch.
  public static var maximumCount: Int { 256 }

  /// Creates a batch.
  public init(requests: [MutationRequest<Mutation>]) {
    self.requests = requests
  }

  /// Whether the batch can be decided: 1 to ``maximumCount`` mutations. (An outbox sends one client id with
  /// increasing ids; a server decides whatever it gets write by write, so a batch that does not is answered
  /// write by write too: a lower id is a repeat or a reused id, another client id its own client.)
  /// - Returns: Why not, or `nil`.
  public var malformation: String? {
    guard !requests.isEmpty else { return "a batch holds at least one mutation" }
    guard requests.count <= Self.maximumCount else {
      return "a batch holds at most \(Self.maximumCount) mutations"
    }
    return nil
  }

  private enum CodingKeys: String, CodingKey {
    case requests = "mutations"
  }
}

/// What the server decided for one mutation of a batch: acknowledged (applied now or before), or refused.
///
/// On the wire, one object per mutation: `{"mutation_id": 7, "result": "success", "applied": true,
/// "events_through": {…}}` or `{"mutation_id": 8, "result": "error", "code": "BAD_REQUEST", "msg": "…"}`.
public enum MutationOutcome: Codable, Sendable, Equatable {
  /// Applied now (`receipt.applied`) or a repeat of one applied before.
  case acknowledged(MutationID, MutationReceipt)
  /// Refused: `BAD_REQUEST` (the application refused it, now or before) or `MUTATION_ID_REUSED`.
  case refused(MutationID, EventAPIError)

  /// The outcome a single mutation's request failing with `error` stands for: a refusal of the mutation
  /// itself (`BAD_REQUEST`, `MUTATION_ID_REUSED`), or `nil` when the error says nothing about it (lost,
  /// timed out, unauthorized, rate limited).
  public init?(_ mutationID: MutationID, refusedBy error: TransportError) {
    guard case .api(let apiError) = error.kind, apiError.code == .badRequest || apiError.code == .mutationIDReused
    else { return nil }
    self = .refused(mutationID, apiError)
  }

  /// The mutation decided.
  public var mutationID: MutationID {
    switch self {
    case .acknowledged(let id, _), .refused(let id, _): id
    }
  }

  private enum CodingKeys: String, CodingKey {
    case mutationID = "mutation_id"
    case result
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    let id = try container.decode(MutationID.self, forKey: .mutationID)
    switch try container.decode(String.self, forKey: .result) {
    case "success": self = .acknowledged(id, try MutationReceipt(from: decoder))
    case "error": self = .refused(id, try EventAPIError(from: decoder))
    case let other:
      throw DecodingError.dataCorruptedError(
        forKey: .result,
        in: container,
        debugDescription: "unknown result \"\(other)\""
      )
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(mutationID, forKey: .mutationID)
    switch self {
    case .acknowledged(_, let receipt):
      try container.encode("success", forKey: .result)
      try receipt.encode(to: encoder)
    case .refused(_, let error):
      try error.encode(to: encoder)
    }
  }
}

/// The answer to a batch: one outcome per mutation decided, in order.
public struct MutationBatchReply: Codable, Sendable, Equatable {
  /// The outcomes, in the batch's order; shorter than the batch when the server stopped after a
  /// `MUTATION_ID_REUSED`.
  public var outcomes: [MutationOutcome]

  /// Creates a reply.
  public init(outcomes: [MutationOutcome]) {
    self.outcomes = outcomes
  }
}
