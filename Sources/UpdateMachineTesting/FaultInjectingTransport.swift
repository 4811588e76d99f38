import EventProtocol
import Synchronization

/// What a ``FaultInjectingTransport`` does to requests: rates in [0, 1] drawn from one seeded generator, so
/// a seed replays the same faults in the same order.
///
/// ```swift
/// var plan = FaultPlan(seed: 7)
/// plan.latency = .milliseconds(20) ... .milliseconds(200)
/// plan.lostAnswerRate = 0.1
/// plan.neverAnswerRate = 0.02
/// ```
public struct FaultPlan: Sendable, Hashable {
  /// The seed of every random choice.
  public var seed: UInt64
  /// How long each request takes, drawn uniformly (on the transport's clock).
  public var latency: ClosedRange<Duration> = .zero ... .zero
  /// Requests that never reach the server: they fail as connection failures after the latency.
  public var lostRequestRate = 0.0
  /// Requests that reach the server but whose answer is lost: connection failures after the server acted.
  public var lostAnswerRate = 0.0
  /// Requests that never answer at all (until cancelled): what the engine's deadlines are for.
  public var neverAnswerRate = 0.0
  /// Requests answered 503.
  public var serverErrorRate = 0.0
  /// Requests answered `RATE_LIMIT_HIT` with ``rateLimitRetryAfter``.
  public var rateLimitRate = 0.0
  /// The `retry-after` of rate-limited answers.
  public var rateLimitRetryAfter: Duration = .seconds(1)

  /// A plan with no faults.
  public init(seed: UInt64) {
    self.seed = seed
  }
}

/// A transport wrapper that injects faults: latency, lost requests, lost answers, requests that never
/// answer, 5xx, rate limits with `retry-after`, and partitions, by a seeded ``FaultPlan`` or scripted one
/// request at a time. It records a trace of what it did.
///
/// ```swift
/// let clock = ManualClock()
/// let flaky = FaultInjectingTransport(InProcessTransport(server: server, user: "alice"),
///                                     plan: FaultPlan(seed: 1), clock: clock)
/// flaky.failNext(.connectionFailed("wifi dropped"))
/// flaky.partitioned = true   // every request fails until healed
/// ```
public final class FaultInjectingTransport<Base: EventTransport, C: Clock>: EventTransport
where C.Duration == Duration {
  public typealias State = Base.State
  public typealias Event = Base.Event
  public typealias Mutation = Base.Mutation

  /// A fault chosen for one request.
  public enum Fault: Sendable, Equatable {
    /// Fail before reaching the server with this error.
    case fail(TransportError)
    /// Reach the server, then lose the answer.
    case loseAnswer
    /// Never answer (until cancelled).
    case neverAnswer
  }

  private struct Inner {
    var random: SeededRandomNumberGenerator
    var scripted: [Fault] = []
    var partitioned = false
    var trace: [String] = []
  }

  private let base: Base
  private let plan: FaultPlan
  private let clock: C
  private let inner: Mutex<Inner>

  /// Wraps `base`.
  /// - Parameters:
  ///   - base: The transport that reaches the server.
  ///   - plan: The random faults; `FaultPlan(seed:)` alone injects none.
  ///   - clock: The clock latency sleeps on (a `ManualClock` in tests).
  public init(_ base: Base, plan: FaultPlan, clock: C) {
    self.base = base
    self.plan = plan
    self.clock = clock
    self.inner = Mutex(Inner(random: SeededRandomNumberGenerator(seed: plan.seed)))
  }

  /// While true, every request fails as a connection failure (a network partition).
  public var partitioned: Bool {
    get { inner.withLock { $0.partitioned } }
    set { inner.withLock { $0.partitioned = newValue } }
  }

  /// What happened to each request, in order.
  public var trace: [String] { inner.withLock { $0.trace } }

  /// Makes the next requests (of any kind) fail with `errors`, in order, before reaching the server.
  public func failNext(_ errors: TransportError...) {
    inner.withLock { $0.scripted.append(contentsOf: errors.map(Fault.fail)) }
  }

  /// Scripts the next requests' faults, in order.
  public func scriptNext(_ faults: Fault...) {
    inner.withLock { $0.scripted.append(contentsOf: faults) }
  }

  public func register(
    eventTypes: Set<String>?,
    lifespan: Duration?,
    clientID: ClientID?
  ) async throws(TransportError) -> Registration<State> {
    try await perform("register") { () async throws(TransportError) in
      try await base.register(eventTypes: eventTypes, lifespan: lifespan, clientID: clientID)
    }
  }

  public func poll(
    after finger: EventFinger,
    dontBlock: Bool,
    limit: Int?
  ) async throws(TransportError) -> [EventEnvelope<Event>] {
    try await perform("poll \(finger)") { () async throws(TransportError) in
      try await base.poll(after: finger, dontBlock: dontBlock, limit: limit)
    }
  }

  public func submit(
    _ request: MutationRequest<Mutation>,
    queueID: QueueID?
  ) async throws(TransportError) -> MutationReceipt {
    try await perform("submit \(request.mutationID)") { () async throws(TransportError) in
      try await base.submit(request, queueID: queueID)
    }
  }

  public func submit(
    _ batch: MutationBatch<Mutation>,
    queueID: QueueID?
  ) async throws(TransportError) -> [MutationOutcome] {
    let ids = batch.requests.map(\.mutationID)
    let name = "submit " + ids.map(\.description).joined(separator: ",")
    return try await perform(name) { () async throws(TransportError) in
      try await base.submit(batch, queueID: queueID)
    }
  }

  private func perform<Value>(
    _ name: String,
    _ call: () async throws(TransportError) -> Value
  ) async throws(TransportError) -> Value {
    let (fault, delay) = inner.withLock { inner -> (Fault?, Duration) in
      let fault = inner.partitioned ? .fail(.connectionFailed("partitioned")) : nextFault(&inner)
      inner.trace.append("\(name): \(fault.map { "\($0)" } ?? "ok")")
      return (fault, drawLatency(&inner.random))
    }
    if delay > .zero {
      do {
        try await clock.sleep(for: delay)
      } catch {
        throw .cancelled
      }
    }
    switch fault {
    case .fail(let error)?:
      throw error
    case .neverAnswer?:
      await Self.waitForCancellation()
      throw .cancelled
    case .loseAnswer?:
      _ = try? await call()
      throw .connectionFailed("answer lost")
    case nil:
      return try await call()
    }
  }

  private func nextFault(_ inner: inout Inner) -> Fault? {
    if !inner.scripted.isEmpty { return inner.scripted.removeFirst() }
    let roll = Double.random(in: 0..<1, using: &inner.random)
    var threshold = plan.lostRequestRate
    if roll < threshold { return .fail(.connectionFailed("request lost")) }
    threshold += plan.lostAnswerRate
    if roll < threshold { return .loseAnswer }
    threshold += plan.neverAnswerRate
    if roll < threshold { return .neverAnswer }
    threshold += plan.serverErrorRate
    if roll < threshold { return .fail(.serverError(status: 503)) }
    threshold += plan.rateLimitRate
    if roll < threshold { return .fail(.api(.rateLimitHit(retryAfter: plan.rateLimitRetryAfter))) }
    return nil
  }

  private func drawLatency(_ random: inout SeededRandomNumberGenerator) -> Duration {
    let low = plan.latency.lowerBound.attoseconds
    let high = plan.latency.upperBound.attoseconds
    guard high > low else { return plan.latency.lowerBound }
    let span = UInt64(clamping: (high - low) / 1_000_000_000)
    return plan.latency.lowerBound + .nanoseconds(Int64(clamping: UInt64.random(in: 0...span, using: &random)))
  }

  /// Suspends until the calling task is cancelled.
  private static func waitForCancellation() async {
    let state = Mutex(Waiting.notYet)
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let alreadyCancelled = state.withLock { state -> Bool in
          if case .cancelled = state { return true }
          state = .waiting(continuation)
          return false
        }
        if alreadyCancelled { continuation.resume() }
      }
    } onCancel: {
      let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
        defer { state = .cancelled }
        if case .waiting(let continuation) = state { return continuation }
        return nil
      }
      continuation?.resume()
    }
  }
}

/// Where a request that never answers stands: not yet waiting, waiting, or cancelled.
private enum Waiting {
  case notYet
  case waiting(CheckedContinuation<Void, Never>)
  case cancelled
}
