import EventProtocol
import SampleApps
import Testing
import UpdateMachineTesting

@testable import UpdateMachine

@Suite("UpdateMachine core: a write that failed to connect goes again once the server is reached")
struct UpdateMachineCoreReconnectTests {
  private let unreachable = TransportError.connectionFailed("no network")

  /// The request of the first action of `kind` in `actions`.
  private func request(of kind: String, in actions: [Core.Action]) -> RequestID? {
    for action in actions {
      switch action {
      case .register(let request, _, _, _) where kind == "register": return request
      case .submit(let request, _, _) where kind == "submit": return request
      default: continue
      }
    }
    return nil
  }

  /// Offline from the start: the register and the first write are both sent, and both fail to connect.
  ///
  /// The register retries after exactly a nanosecond and the outbox at a random moment of the next minute, so
  /// the register's retry comes first whatever the draws (with the same policy for both, which came first
  /// depended on the seed's draws).
  /// - Returns: The harness with the network back and the register retried, and the requests in flight.
  private func offlineStart() -> (harness: CoreHarness, register: RequestID, write: RequestID)? {
    var harness = CoreHarness {
      $0.backoff = BackoffPolicy(base: .nanoseconds(1), cap: .nanoseconds(1))
      $0.outboxBackoff = BackoffPolicy(base: .seconds(60), cap: .seconds(120))
    }
    let started = harness.acknowledgingSaves(harness.core.loaded(nil, now: t0), now: t0)
    let (_, submitted) = harness.submit(.post("written offline", to: [alice]), now: t0)
    guard let register = request(of: "register", in: started), let write = request(of: "submit", in: submitted)
    else { return nil }
    return (harness, register, write)
  }

  @Test("the write's failure arrives after the register that reached the server: it is sent again at once")
  func failureAfterTheServerWasReached() throws {
    var (harness, register, write) = try #require(offlineStart())
    _ = harness.core.registerFailed(register, unreachable, now: t0)
    let retried = harness.core.networkBecameAvailable(now: t0)
    let again = try #require(request(of: "register", in: retried))
    _ = harness.acknowledgingSaves(harness.core.registerSucceeded(again, registration(notes: []), now: t0), now: t0)
    // The write was sent before the network came back; its failure says nothing about the network now.
    let failed = harness.acknowledgingSaves(harness.core.submitFailed(write, unreachable, now: t0), now: t0)
    #expect(request(of: "submit", in: failed) != nil, "\(failed)")
  }

  @Test("the write failed to connect before the server was reached: reaching it ends the write's wait")
  func failureBeforeTheServerWasReached() throws {
    var (harness, register, write) = try #require(offlineStart())
    _ = harness.core.registerFailed(register, unreachable, now: t0)
    #expect(request(of: "submit", in: harness.core.submitFailed(write, unreachable, now: t0)) == nil)
    // The register's own backoff ends (its timer), and it reaches the server: no `networkBecameAvailable`.
    let retryAt = try #require(harness.core.nextWakeUp(after: t0))
    let retried = harness.core.timerFired(now: retryAt)
    let again = try #require(request(of: "register", in: retried))
    let registered = harness.acknowledgingSaves(
      harness.core.registerSucceeded(again, registration(notes: []), now: retryAt),
      now: retryAt
    )
    #expect(request(of: "submit", in: registered) != nil, "\(registered)")
  }

  @Test("the register sent offline fails after the network was reported back: it goes again at once")
  func registerFailureAfterTheNetworkCameBack() throws {
    var (harness, register, write) = try #require(offlineStart())
    _ = harness.core.submitFailed(write, unreachable, now: t0)
    _ = harness.core.networkBecameAvailable(now: t0)
    // Sent while offline; its failure is about the network before the report.
    let failed = harness.core.registerFailed(register, unreachable, now: t0)
    let again = try #require(request(of: "register", in: failed), "\(failed)")
    let registered = harness.acknowledgingSaves(
      harness.core.registerSucceeded(again, registration(notes: []), now: t0),
      now: t0
    )
    #expect(request(of: "submit", in: registered) != nil, "\(registered)")
  }

  @Test("connected all along: a write that fails to connect keeps its backoff while polls go on succeeding")
  func connectedWriteKeepsItsBackoff() throws {
    var harness = CoreHarness()
    harness.startLive()
    let (_, submitted) = harness.submit(.post("mine", to: [alice]), now: t0)
    let write = try #require(request(of: "submit", in: submitted))
    #expect(request(of: "submit", in: harness.core.submitFailed(write, unreachable, now: t0)) == nil)
    // Polls answered while the write waits: the machine never lost the server, so nothing says the network
    // came back, and the write is not sent again before its backoff ends.
    let polled = harness.acknowledgingSaves(harness.core.pollSucceeded(RequestID(rawValue: 2), [], now: t0), now: t0)
    #expect(request(of: "submit", in: polled) == nil, "\(polled)")
  }

  @Test("a write the server answered 503 keeps its wait when a register reaches the server")
  func serverErrorKeepsItsWait() throws {
    var (harness, register, write) = try #require(offlineStart())
    _ = harness.core.registerFailed(register, unreachable, now: t0)
    _ = harness.core.submitFailed(write, .serverError(status: 503), now: t0)
    let retried = harness.core.networkBecameAvailable(now: t0)
    let again = try #require(request(of: "register", in: retried))
    let registered = harness.acknowledgingSaves(
      harness.core.registerSucceeded(again, registration(notes: []), now: t0),
      now: t0
    )
    #expect(request(of: "submit", in: registered) == nil, "\(registered)")
  }
}
