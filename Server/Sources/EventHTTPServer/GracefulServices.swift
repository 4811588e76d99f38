import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Runs a server's services as one group that shuts down gracefully on SIGTERM or SIGINT (when asked) or on
/// ``shutdown()``, even one asked before the group started.
final class GracefulServices: Sendable {
  private let running = Mutex<ServiceGroup?>(nil)
  private let shutdownRequested = Mutex(false)

  /// Runs `services` until they end or shut down; a shutdown that does not drain within `grace` cancels
  /// what is left (logged, not thrown: the caller writes its state either way).
  func run(_ services: [any Service], handleSignals: Bool, grace: Duration, logger: Logger) async {
    var configuration = ServiceGroupConfiguration(
      services: services.map { .init(service: $0) },
      gracefulShutdownSignals: handleSignals ? [.sigterm, .sigint] : [],
      logger: logger
    )
    // A request that never finishes (a client that stalls mid-upload) must not hold the shutdown: after this
    // long the rest is cancelled.
    configuration.maximumGracefulShutdownDuration = grace
    let group = ServiceGroup(configuration: configuration)
    running.withLock { $0 = group }
    if shutdownRequested.withLock({ $0 }) { await group.triggerGracefulShutdown() }
    do {
      try await group.run()
    } catch {
      logger.warning("shutdown did not drain in time: \(error)")
    }
  }

  /// Shuts the group down gracefully (at its start, when it has not started yet).
  func shutdown() async {
    shutdownRequested.withLock { $0 = true }
    let group = running.withLock { $0 }
    await group?.triggerGracefulShutdown()
  }
}
