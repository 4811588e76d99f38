/// How a client engine talks to an events server: register, poll and submit mutations.
///
/// Implementations classify every failure into a ``TransportError`` so the engine can decide between
/// retrying, re-registering and stopping. `EventServer`'s `InProcessTransport` is one implementation; an
/// HTTP client speaking the JSON in `docs/protocol.md` is another.
///
/// ```swift
/// let registration = try await transport.register(eventTypes: nil, lifespan: nil, clientID: nil)
/// let events = try await transport.poll(after: registration.finger, dontBlock: false, limit: 1_000)
/// ```
public protocol EventTransport<State, Event, Mutation>: Sendable {
  /// What a registration's snapshot holds: the client's whole state.
  associatedtype State: Codable & Sendable & Equatable
  /// The events the client applies.
  associatedtype Event: EventPayload
  /// The writes the client sends.
  associatedtype Mutation: Codable & Sendable & Equatable

  /// Registers a queue for this installation and fetches the snapshot atomic with it.
  /// - Parameters:
  ///   - eventTypes: The event types to queue; `nil` for all.
  ///   - lifespan: The idle timeout to ask for.
  ///   - clientID: The installation registering, so the server knows which installation a queue serves
  ///     (for push notifications).
  /// - Throws: ``TransportError``.
  func register(
    eventTypes: Set<String>?,
    lifespan: Duration?,
    clientID: ClientID?
  ) async throws(TransportError) -> Registration<State>

  /// Polls for the events after `finger`, acknowledging everything up to it.
  /// - Parameters:
  ///   - finger: The queue and the last event applied.
  ///   - dontBlock: Answer at once even with nothing to deliver.
  ///   - limit: The most events to answer with, oldest first; `nil` for all.
  /// - Throws: ``TransportError``; `CancellationError`-like cancellation surfaces as ``TransportError/cancelled``.
  func poll(
    after finger: EventFinger,
    dontBlock: Bool,
    limit: Int?
  ) async throws(TransportError) -> [EventEnvelope<Event>]

  /// Sends one mutation; the server applies each (client, mutation id) at most once.
  /// - Throws: ``TransportError``.
  func submit(_ request: MutationRequest<Mutation>, queueID: QueueID?) async throws(TransportError) -> MutationReceipt

  /// Sends several mutations of one client in one request (``MutationBatch``): applied in order, each at
  /// most once. By default it sends the first alone with ``submit(_:queueID:)`` and answers its outcome
  /// (the engine sends the rest next).
  /// - Returns: One outcome per mutation decided, in order: at least one, at most the batch.
  /// - Throws: ``TransportError`` when no mutation was decided (a refusal of the whole request, a lost
  ///   connection, a timeout).
  func submit(_ batch: MutationBatch<Mutation>, queueID: QueueID?) async throws(TransportError) -> [MutationOutcome]

  /// Fetches one page of partial state, read atomically with the queue's last event id (see
  /// ``FetchAnswer``). By default the transport cannot fetch and throws ``EventAPIError/Code/badRequest``.
  /// - Parameters:
  ///   - request: The narrow, the anchor and how many items on each side.
  ///   - queueID: The caller's queue, whose last event id the answer carries.
  ///   - itemType: The type of the items.
  /// - Throws: ``TransportError``; a queue that is gone is ``EventAPIError/Code/badEventQueueID``.
  func fetch<Item: Codable & Sendable & Equatable>(
    _ request: FetchRequest,
    queueID: QueueID,
    as itemType: Item.Type
  ) async throws(TransportError) -> FetchAnswer<Item>
}

extension EventTransport {
  public func submit(
    _ batch: MutationBatch<Mutation>,
    queueID: QueueID?
  ) async throws(TransportError) -> [MutationOutcome] {
    guard let first = batch.requests.first else { throw .api(.badRequest("a batch holds at least one mutation")) }
    return [try await submitAlone(first, queueID: queueID)]
  }

  /// Sends one mutation with `submit(_:queueID:)` and answers its outcome as a batch would: a refusal of
  /// the mutation itself (`BAD_REQUEST`, `MUTATION_ID_REUSED`) is an outcome, any other failure is thrown.
  public func submitAlone(
    _ request: MutationRequest<Mutation>,
    queueID: QueueID?
  ) async throws(TransportError) -> MutationOutcome {
    do {
      return .acknowledged(request.mutationID, try await submit(request, queueID: queueID))
    } catch {
      guard let outcome = MutationOutcome(request.mutationID, refusedBy: error) else { throw error }
      return outcome
    }
  }

  public func fetch<Item: Codable & Sendable & Equatable>(
    _ request: FetchRequest,
    queueID: QueueID,
    as itemType: Item.Type
  ) async throws(TransportError) -> FetchAnswer<Item> {
    throw .api(.badRequest("this transport cannot fetch pages of partial state"))
  }
}

/// Why a request to the server failed, classified for the engine's retry decisions.
public struct TransportError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The failure classes.
  public enum Kind: Hashable, Sendable {
    /// No connection, or it dropped.
    case connectionFailed
    /// The client's own timeout passed with no answer.
    case timedOut
    /// The server answered 5xx.
    case serverError(status: Int)
    /// The server answered with an API error (queue expired, bad request, rate limit, unauthorized) or the
    /// answer could not be decoded (``EventAPIError/Code/malformedResponse``).
    case api(EventAPIError)
    /// The request was cancelled by the client.
    case cancelled
  }

  /// The class of failure.
  public let kind: Kind
  /// Details for logs.
  public let detail: String

  /// Creates a Kind from its parts.
  public init(_ kind: Kind, detail: String = "") {
    self.kind = kind
    self.detail = detail
  }

  /// A connection failure.
  public static func connectionFailed(_ detail: String = "connection failed") -> TransportError {
    TransportError(.connectionFailed, detail: detail)
  }
  /// The client's timeout.
  public static let timedOut = TransportError(.timedOut, detail: "timed out")
  /// A 5xx answer.
  public static func serverError(status: Int) -> TransportError {
    TransportError(.serverError(status: status), detail: "server error \(status)")
  }
  /// An API error answer.
  public static func api(_ error: EventAPIError) -> TransportError {
    TransportError(.api(error), detail: error.description)
  }
  /// Cancelled by the client.
  public static let cancelled = TransportError(.cancelled, detail: "cancelled")

  public var description: String { detail }
}
