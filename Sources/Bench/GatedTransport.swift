import EventProtocol
import Synchronization

/// A transport that holds the machine's polls until ``open()``: C1 queues the whole backlog first, then
/// times the client draining it alone (the server's command that queued it is W1's figure).
final class GatedTransport<Base: EventTransport>: EventTransport {
  typealias State = Base.State
  typealias Event = Base.Event
  typealias Mutation = Base.Mutation

  private let base: Base
  /// Whether the gate is open, and the polls waiting at it.
  private let gate = Mutex<(isOpen: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

  init(_ base: Base) {
    self.base = base
  }

  /// Lets every waiting poll and every later one through.
  func open() {
    let waiting = gate.withLock { gate in
      gate.isOpen = true
      defer { gate.waiting = [] }
      return gate.waiting
    }
    for poll in waiting { poll.resume() }
  }

  /// Whether a poll is waiting at the closed gate.
  var hasWaitingPoll: Bool { gate.withLock { !$0.waiting.isEmpty } }

  func register(
    eventTypes: Set<String>?,
    lifespan: Duration?,
    clientID: ClientID?
  ) async throws(TransportError) -> Registration<State> {
    try await base.register(eventTypes: eventTypes, lifespan: lifespan, clientID: clientID)
  }

  func poll(
    after finger: EventFinger,
    dontBlock: Bool,
    limit: Int?
  ) async throws(TransportError) -> [EventEnvelope<Event>] {
    await withCheckedContinuation { (poll: CheckedContinuation<Void, Never>) in
      let passes = gate.withLock { gate in
        if !gate.isOpen { gate.waiting.append(poll) }
        return gate.isOpen
      }
      if passes { poll.resume() }
    }
    return try await base.poll(after: finger, dontBlock: dontBlock, limit: limit)
  }

  func submit(_ request: MutationRequest<Mutation>, queueID: QueueID?) async throws(TransportError) -> MutationReceipt {
    try await base.submit(request, queueID: queueID)
  }

  func submit(_ batch: MutationBatch<Mutation>, queueID: QueueID?) async throws(TransportError) -> [MutationOutcome] {
    try await base.submit(batch, queueID: queueID)
  }

  func fetch<Item: Codable & Sendable & Equatable>(
    _ request: FetchRequest,
    queueID: QueueID,
    as itemType: Item.Type
  ) async throws(TransportError) -> FetchAnswer<Item> {
    try await base.fetch(request, queueID: queueID, as: itemType)
  }
}
