import Logging
import Synchronization

/// Whether a log's connections to its database are failing, from PostgresNIO's reports of each attempt:
/// what turns the pool's one line per failed attempt (70 to 80 per node in a ten-second outage) into one
/// line when the outage begins and one, with the count, when a connection succeeds again.
struct ConnectionOutage: Equatable, Sendable {
  /// Whether the last attempt failed, and how many have since the last success.
  enum State: Equatable, Sendable {
    case connected
    case failing(attempts: Int)
  }

  /// What to log about an attempt.
  enum Action: Equatable, Sendable {
    /// The first failure of an outage: log it, saying the next ones are counted.
    case logFirstFailure
    /// A failure within an outage already logged, or a success outside one: nothing.
    case stayQuiet
    /// A success after `attempts` failed ones: log that the database is reachable again.
    case logRestored(afterAttempts: Int)
  }

  private(set) var state = State.connected

  /// An attempt to connect failed.
  mutating func connectFailed() -> Action {
    switch state {
    case .connected:
      state = .failing(attempts: 1)
      return .logFirstFailure
    case .failing(let attempts):
      state = .failing(attempts: attempts + 1)
      return .stayQuiet
    }
  }

  /// An attempt to connect succeeded.
  mutating func connectSucceeded() -> Action {
    guard case .failing(let attempts) = state else { return .stayQuiet }
    state = .connected
    return .logRestored(afterAttempts: attempts)
  }
}

/// The log handler of a PostgreSQL log's connection pools: forwards what `upstream` would log, but PostgresNIO's
/// "Connection creation failed" once per outage (``ConnectionOutage``); the log's next successful operation
/// ends the outage with a line of its own (``Shared/noteWorking(_:)``).
struct ConnectionOutageLogHandler: LogHandler {
  private static let failed: Logger.Message = "Connection creation failed"

  /// The outage its copies share.
  final class Shared: Sendable {
    let outage = Mutex(ConnectionOutage())

    /// An operation on the database succeeded (PostgresNIO says nothing when a connection is made): ends an
    /// outage, logging how many attempts failed in it.
    func noteWorking(_ logger: Logger) {
      guard case .logRestored(let attempts) = outage.withLock({ $0.connectSucceeded() }) else { return }
      logger.warning("Connections to the database succeed again after \(attempts) failed attempts")
    }
  }

  private var upstream: any LogHandler
  private let shared: Shared

  init(upstream: any LogHandler, shared: Shared) {
    self.upstream = upstream
    self.shared = shared
  }

  var metadataProvider: Logger.MetadataProvider? {
    get { upstream.metadataProvider }
    set { upstream.metadataProvider = newValue }
  }

  var metadata: Logger.Metadata {
    get { upstream.metadata }
    set { upstream.metadata = newValue }
  }

  subscript(metadataKey key: String) -> Logger.Metadata.Value? {
    get { upstream[metadataKey: key] }
    set { upstream[metadataKey: key] = newValue }
  }

  var logLevel: Logger.Level {
    get { upstream.logLevel }
    set { upstream.logLevel = newValue }
  }

  func log(event: LogEvent) {
    var event = event
    switch event.message {
    case Self.failed:
      guard shared.outage.withLock({ $0.connectFailed() }) == .logFirstFailure else { return }
      event.message = "Connection creation failed; the next failures are counted until a connection succeeds"
      event.level = max(event.level, .warning)
    default:
      break
    }
    upstream.log(event: event)
  }
}

extension Logger {
  /// This logger with PostgresNIO's failed connection attempts logged once per outage
  /// (``ConnectionOutageLogHandler``); copies of it share `outage`.
  func summarizingConnectionOutages(_ outage: ConnectionOutageLogHandler.Shared) -> Logger {
    var logger = self
    logger.handler = ConnectionOutageLogHandler(upstream: handler, shared: outage)
    return logger
  }
}
