import Logging
import Synchronization
import Testing

@testable import PostgresServerLog

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
    let upstream = KeepingLogHandler()
    let outage = ConnectionOutageLogHandler.Shared()
    let logger = Logger(label: "test") { _ in upstream }.summarizingConnectionOutages(outage)
    for _ in 0..<80 { logger.info("Connection creation failed") }
    outage.noteWorking(logger)
    outage.noteWorking(logger)
    logger.info("partitions moved")
    logger.info("Connection creation failed")
    let lines = upstream.kept.lines.withLock { $0 }
    #expect(lines.map(\.level) == [.warning, .warning, .info, .warning])
    #expect(lines[0].message.hasPrefix("Connection creation failed"))
    #expect(lines[1].message == "Connections to the database succeed again after 80 failed attempts")
    #expect(lines[2].message == "partitions moved")
  }
}
