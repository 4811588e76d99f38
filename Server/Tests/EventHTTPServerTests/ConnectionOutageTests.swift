import Logging
import Synchronization
import Testing

@testable import PostgresServerLog

/// A log handler that keeps what it is given.
private struct CapturingLogHandler: LogHandler {
  final class Lines: Sendable {
    let lines = Mutex<[(Logger.Level, String)]>([])
  }

  let captured = Lines()
  var metadata: Logger.Metadata = [:]
  var metadataProvider: Logger.MetadataProvider?
  var logLevel: Logger.Level = .info

  subscript(metadataKey key: String) -> Logger.Metadata.Value? {
    get { metadata[key] }
    set { metadata[key] = newValue }
  }

  func log(event: LogEvent) {
    captured.lines.withLock { $0.append((event.level, event.message.description)) }
  }
}

/// A database outage is one line when it begins and one, with the count, when connections succeed again,
/// not one line per failed attempt of every pool.
@Suite("Connection failures: one line per outage, with a count")
struct ConnectionOutageTests {
  @Test("the machine: the first failure is logged, the next counted, a success reports the count once")
  func machine() {
    var outage = ConnectionOutage()
    #expect(outage.connectSucceeded() == .stayQuiet)
    #expect(outage.connectFailed() == .logFirstFailure)
    for _ in 0..<4 { #expect(outage.connectFailed() == .stayQuiet) }
    #expect(outage.state == .failing(attempts: 5))
    #expect(outage.connectSucceeded() == .logRestored(afterAttempts: 5))
    #expect(outage.connectSucceeded() == .stayQuiet)
    #expect(outage.connectFailed() == .logFirstFailure)
  }

  @Test("through the log's logger: 80 failures are one warning, the next success another; other lines pass")
  func handler() {
    let upstream = CapturingLogHandler()
    let outage = ConnectionOutageLogHandler.Shared()
    let logger = Logger(label: "test") { _ in upstream }.summarizingConnectionOutages(outage)
    for _ in 0..<80 { logger.info("Connection creation failed") }
    outage.noteWorking(logger)
    outage.noteWorking(logger)
    logger.info("partitions moved")
    logger.info("Connection creation failed")
    let lines = upstream.captured.lines.withLock { $0 }
    #expect(lines.map(\.0) == [.warning, .warning, .info, .warning])
    #expect(lines[0].1.hasPrefix("Connection creation failed"))
    #expect(lines[1].1 == "Connections to the database succeed again after 80 failed attempts")
    #expect(lines[2].1 == "partitions moved")
  }
}
