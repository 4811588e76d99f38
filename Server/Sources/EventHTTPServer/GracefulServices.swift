import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Runs a server's services as one group that shuts down gracefully on SIGTERM or SIGINT (when asked) or on
/// ``shutdown()``, even one asked before the group started.
final class GracefulServices: Sendable {
  private let running = Mutex<ServiceGroup?>(nil)
  /// Whether a service failed before any shutdown began, or the shutdown came first.
  private let phase = Mutex(Phase.running)

  /// What ended the group's run, once something did.
  enum Phase: Sendable {
    /// Every service runs.
    case running
    /// The graceful shutdown began (a signal or ``GracefulServices/shutdown()``): an error after it is a
    /// drain cut at the grace, logged.
    case shuttingDown
    /// A service threw, or returned, before any shutdown: the group ends with its error.
    case failed(any Error)
  }

  /// Runs `services` until they end or shut down. A shutdown that does not drain within `grace` cancels what
  /// is left (logged, not thrown: the caller writes its state either way).
  /// - Throws: The error of a service that failed, or ended, before any shutdown began (a listener that could
  ///   not bind its port, say): the process must then exit non-zero, so that a supervisor sees the failure.
  func run(_ services: [any Service], handleSignals: Bool, grace: Duration, logger: Logger) async throws {
    let watched: [any Service] = services.map { WatchedService(inner: $0, phase: self) }
    var configuration = ServiceGroupConfiguration(
      services: (watched + [ShutdownWatcher(phase: self)]).map { .init(service: $0) },
      gracefulShutdownSignals: handleSignals ? [.sigterm, .sigint] : [],
      logger: logger
    )
    // A request that never finishes (a client that stalls mid-upload) must not hold the shutdown: after this
    // long the rest is cancelled.
    configuration.maximumGracefulShutdownDuration = grace
    let group = ServiceGroup(configuration: configuration)
    running.withLock { $0 = group }
    if case .shuttingDown = phase.withLock({ $0 }) { await group.triggerGracefulShutdown() }
    do {
      try await group.run()
    } catch {
      if case .failed(let failure) = phase.withLock({ $0 }) {
        logger.error("a service failed; stopping", metadata: ["error": "\(failure)"])
        throw failure
      }
      logger.warning("shutdown did not drain in time: \(error)")
    }
  }

  /// Shuts the group down gracefully (at its start, when it has not started yet).
  func shutdown() async {
    shutdownBegan()
    let group = running.withLock { $0 }
    await group?.triggerGracefulShutdown()
  }

  /// The graceful shutdown began; a failure from now on is part of it.
  fileprivate func shutdownBegan() {
    phase.withLock { if case .running = $0 { $0 = .shuttingDown } }
  }

  /// A service ended with `error` (or returned): a failure unless the shutdown began first.
  fileprivate func serviceEnded(with error: any Error) {
    phase.withLock { if case .running = $0 { $0 = .failed(error) } }
  }
}

/// A service of the group that only notes when the group's graceful shutdown begins (it is the last, so the
/// first to hear of it).
private struct ShutdownWatcher: Service {
  let phase: GracefulServices

  func run() async throws {
    try? await gracefulShutdown()
    phase.shutdownBegan()
  }
}

/// A service whose end before any shutdown is noted as the group's failure.
private struct WatchedService: Service {
  let inner: any Service
  let phase: GracefulServices

  func run() async throws {
    do {
      try await inner.run()
    } catch {
      phase.serviceEnded(with: error)
      throw error
    }
    if !Task.isShuttingDownGracefully, !Task.isCancelled {
      phase.serviceEnded(with: ServiceEndedEarly(service: "\(type(of: inner))"))
    }
  }
}

/// A service returned while nothing asked the group to stop.
struct ServiceEndedEarly: Error, CustomStringConvertible {
  let service: String
  var description: String { "\(service) ended before any shutdown" }
}
