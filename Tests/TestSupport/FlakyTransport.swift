import EventProtocol
import Synchronization

/// A transport that fails the next requests on demand, then passes requests to the one it wraps.
public final class FlakyTransport<Base: EventTransport>: EventTransport {
  public typealias State = Base.State
  public typealias Event = Base.Event
  public typealias Mutation = Base.Mutation

  private let base: Base
  private let failures = Mutex<[TransportError]>([])

  public init(_ base: Base) {
    self.base = base
  }

  /// Makes the next requests (of any kind) fail with `errors`, in order.
  public func failNext(_ errors: TransportError...) {
    failures.withLock { $0.append(contentsOf: errors) }
  }

  private func nextFailure() -> TransportError? {
    failures.withLock { $0.isEmpty ? nil : $0.removeFirst() }
  }

  public func register(
    eventTypes: Set<String>?,
    lifespan: Duration?
  ) async throws(TransportError) -> Registration<State> {
    if let failure = nextFailure() { throw failure }
    return try await base.register(eventTypes: eventTypes, lifespan: lifespan)
  }

  public func poll(after finger: EventFinger, dontBlock: Bool) async throws(TransportError) -> [EventEnvelope<Event>] {
    if let failure = nextFailure() { throw failure }
    return try await base.poll(after: finger, dontBlock: dontBlock)
  }

  public func submit(
    _ request: MutationRequest<Mutation>,
    queueID: QueueID?
  ) async throws(TransportError) -> MutationReceipt {
    if let failure = nextFailure() { throw failure }
    return try await base.submit(request, queueID: queueID)
  }
}
