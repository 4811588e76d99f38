/// An error answered by the events API, or found in its answer.
///
/// Mirrors Zulip's error body (`{"result": "error", "code": …, "msg": …}`). Match on ``code``, never on
/// ``message``: Zulip translates messages. Static members build each error the server answers:
///
/// ```swift
/// do {
///   _ = try WireFormat.decode(EventsReply<MyEvent>.self, from: body)
/// } catch let error where error.code == .badEventQueueID {
///   // The queue expired: register again.
/// }
/// ```
public struct EventAPIError: Error, Hashable, Sendable, Codable, CustomStringConvertible {
  /// The machine-readable kind of an ``EventAPIError``; new codes can be added without breaking callers.
  public struct Code: Hashable, Sendable, CustomStringConvertible {
    private enum Base: Hashable {
      case badEventQueueID
      case badRequest
      case rateLimitHit
      case unauthorized
      case malformedResponse
      case mutationIDReused
      case serviceUnavailable
      case other(String)
    }

    private let base: Base

    private init(_ base: Base) {
      self.base = base
    }

    /// The queue is unknown, expired, or not the caller's: register a new one.
    public static let badEventQueueID = Code(.badEventQueueID)
    /// The request was wrong (an event id already pruned or never in the queue, a rejected command).
    public static let badRequest = Code(.badRequest)
    /// Too many requests; wait for ``EventAPIError/retryAfter`` when given.
    public static let rateLimitHit = Code(.rateLimitHit)
    /// The credentials were refused.
    public static let unauthorized = Code(.unauthorized)
    /// The response could not be understood (never sent by a server; found by the client's decoder).
    public static let malformedResponse = Code(.malformedResponse)
    /// A mutation id the server already decided arrived with a different write: the client's ids were
    /// reused (a restored backup, a counter that went backwards). The client takes a new client id and
    /// sends the write again.
    public static let mutationIDReused = Code(.mutationIDReused)
    /// The server could not do it this time (its store is failing, it is stopping): nothing was changed or
    /// acknowledged, and the same request is to be sent again later (after ``EventAPIError/retryAfter``
    /// when given). Always with a `5xx` status; never a reason to drop a write.
    public static let serviceUnavailable = Code(.serviceUnavailable)

    /// Whether the code tells a client to give the request up (drop the write, register again, stop):
    /// `BAD_REQUEST`, `BAD_EVENT_QUEUE_ID`, `MUTATION_ID_REUSED`, `UNAUTHORIZED`. A server never sends one
    /// of these with a `5xx` status.
    public var meansGiveUp: Bool {
      switch base {
      case .badRequest, .badEventQueueID, .mutationIDReused, .unauthorized: true
      case .rateLimitHit, .malformedResponse, .serviceUnavailable, .other: false
      }
    }

    /// The code as the wire spells it (`"BAD_EVENT_QUEUE_ID"`, …).
    public var wireValue: String {
      switch base {
      case .badEventQueueID: "BAD_EVENT_QUEUE_ID"
      case .badRequest: "BAD_REQUEST"
      case .rateLimitHit: "RATE_LIMIT_HIT"
      case .unauthorized: "UNAUTHORIZED"
      case .malformedResponse: "MALFORMED_RESPONSE"
      case .mutationIDReused: "MUTATION_ID_REUSED"
      case .serviceUnavailable: "SERVICE_UNAVAILABLE"
      case .other(let value): value
      }
    }

    /// The code for a wire value; unknown values are kept as they are.
    public init(wireValue: String) {
      switch wireValue {
      case "BAD_EVENT_QUEUE_ID": self.init(.badEventQueueID)
      case "BAD_REQUEST": self.init(.badRequest)
      case "RATE_LIMIT_HIT": self.init(.rateLimitHit)
      case "UNAUTHORIZED", "UNAUTHORIZED_PRINCIPAL": self.init(.unauthorized)
      case "MALFORMED_RESPONSE": self.init(.malformedResponse)
      case "MUTATION_ID_REUSED": self.init(.mutationIDReused)
      case "SERVICE_UNAVAILABLE": self.init(.serviceUnavailable)
      default: self.init(.other(wireValue))
      }
    }

    public var description: String { wireValue }
  }

  /// What kind of error this is.
  public let code: Code
  /// A human-readable explanation (translated by Zulip; do not match on it).
  public let message: String
  /// The queue a ``Code/badEventQueueID`` error is about.
  public let queueID: QueueID?
  /// How long to wait before retrying, when the server said (rate limits).
  public let retryAfter: Duration?
  /// Why the credentials of an ``Code/unauthorized`` error were refused, when the server says
  /// (`"TOKEN_EXPIRED"`, `"TOKEN_WRONG_AUDIENCE"`, …; docs/protocol.md lists them): the wire's `reason`.
  ///
  /// Match on ``code`` first: every refusal of credentials is `UNAUTHORIZED`, whatever its reason.
  public let reason: String?

  /// Creates an error from its parts; prefer the static members.
  public init(code: Code, message: String, queueID: QueueID? = nil, retryAfter: Duration? = nil) {
    self.init(code: code, message: message, queueID: queueID, retryAfter: retryAfter, reason: nil)
  }

  /// Creates an error from its parts, with the reason the credentials were refused.
  /// - Parameters:
  ///   - code: What kind of error this is.
  ///   - message: A human-readable explanation.
  ///   - queueID: The queue a ``Code/badEventQueueID`` error is about.
  ///   - retryAfter: How long to wait before retrying.
  ///   - reason: Why credentials were refused (for ``Code/unauthorized``).
  public init(code: Code, message: String, queueID: QueueID?, retryAfter: Duration?, reason: String?) {
    self.code = code
    self.message = message
    self.queueID = queueID
    self.retryAfter = retryAfter
    self.reason = reason
  }

  /// The queue is unknown, expired or belongs to another user; the three are answered alike.
  public static func badEventQueueID(_ queueID: QueueID) -> EventAPIError {
    EventAPIError(code: .badEventQueueID, message: "Bad event queue ID: \(queueID)", queueID: queueID)
  }

  /// `lastEventID` is older than what the queue already pruned.
  public static func alreadyPruned(lastEventID: Int) -> EventAPIError {
    EventAPIError(code: .badRequest, message: "An event newer than \(lastEventID) has already been pruned!")
  }

  /// `lastEventID` was never in the queue (an id the queue has not reached yet).
  public static func notInQueue(lastEventID: Int) -> EventAPIError {
    EventAPIError(code: .badRequest, message: "Event \(lastEventID) was not in this queue")
  }

  /// Any other bad request, such as a command the application rejected.
  public static func badRequest(_ message: String) -> EventAPIError {
    EventAPIError(code: .badRequest, message: message)
  }

  /// The rate limit was hit.
  public static func rateLimitHit(retryAfter: Duration?) -> EventAPIError {
    EventAPIError(code: .rateLimitHit, message: "API usage exceeded rate limit", retryAfter: retryAfter)
  }

  /// The credentials were refused.
  public static func unauthorized(_ message: String = "Invalid API key") -> EventAPIError {
    EventAPIError(code: .unauthorized, message: message)
  }

  /// The credentials were refused for `reason` (`"TOKEN_EXPIRED"`, …), explained by `message`.
  ///
  /// ```swift
  /// throw EventAPIError.unauthorized("the token expired", reason: "TOKEN_EXPIRED")
  /// ```
  public static func unauthorized(_ message: String, reason: String) -> EventAPIError {
    EventAPIError(code: .unauthorized, message: message, queueID: nil, retryAfter: nil, reason: reason)
  }

  /// Mutation `mutationID` of this client was already decided for a different write.
  public static func mutationIDReused(_ mutationID: MutationID) -> EventAPIError {
    EventAPIError(
      code: .mutationIDReused,
      message: "Mutation \(mutationID) was already used by this client for a different write"
    )
  }

  /// The server cannot serve the request this time (`503`); the client sends it again later.
  /// - Parameters:
  ///   - message: What failed, without internals.
  ///   - retryAfter: How long to wait first, when the server knows.
  public static func serviceUnavailable(_ message: String, retryAfter: Duration? = nil) -> EventAPIError {
    EventAPIError(code: .serviceUnavailable, message: message, retryAfter: retryAfter)
  }

  /// A response body that could not be decoded.
  public static func malformedResponse(_ explanation: String) -> EventAPIError {
    EventAPIError(code: .malformedResponse, message: "Malformed response: \(explanation)")
  }

  public var description: String {
    "\(code.wireValue): \(message)"
  }

  private enum CodingKeys: String, CodingKey {
    case result
    case code
    case message = "msg"
    case queueID = "queue_id"
    case retryAfter = "retry-after"
    case reason
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    self.code = Code(wireValue: try container.decode(String.self, forKey: .code))
    self.message = try container.decodeIfPresent(String.self, forKey: .message) ?? ""
    self.queueID = try container.decodeIfPresent(QueueID.self, forKey: .queueID)
    self.retryAfter = try container.decodeIfPresent(Double.self, forKey: .retryAfter).map(Duration.fractionalSeconds)
    self.reason = try container.decodeIfPresent(String.self, forKey: .reason)
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode("error", forKey: .result)
    try container.encode(code.wireValue, forKey: .code)
    try container.encode(message, forKey: .message)
    try container.encodeIfPresent(queueID, forKey: .queueID)
    try container.encodeIfPresent(retryAfter?.inSeconds, forKey: .retryAfter)
    try container.encodeIfPresent(reason, forKey: .reason)
  }
}
