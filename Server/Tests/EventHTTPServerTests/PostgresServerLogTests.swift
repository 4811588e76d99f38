import EventProtocol
import EventServer
import Foundation
import Logging
import PostgresServerLog
import SampleApps
import Synchronization
import TestScheduling
import Testing

/// The PostgreSQL server these tests use: `Server/scripts/postgres-tests.sh` starts one on loopback and sets
/// it; without it the suite is skipped, saying why.
let testPostgresURL = ProcessInfo.processInfo.environment["EVENT_SERVER_TEST_POSTGRES_URL"]

/// A database deadline for a test: `base` times `EVENT_SERVER_TEST_TIMEOUT_SCALE` (1 unless set).
/// `Server/scripts/postgres-tests.sh` sets 4 under ThreadSanitizer, where every statement of a busy machine's
/// suites, run side by side, may take longer than a production deadline; a test's verdict is then about
/// what the log does at its deadline, not about how fast the machine is.
func testTimeout(_ base: Duration) -> Duration {
  let scale = ProcessInfo.processInfo.environment["EVENT_SERVER_TEST_TIMEOUT_SCALE"].flatMap(Int.init) ?? 1
  return base * max(scale, 1)
}

/// A fresh database on the test server for one test, dropped afterwards.
struct ScratchDatabase {
  let url: String
  private let name: String

  static func create() async throws -> ScratchDatabase {
    let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    try await admin("CREATE DATABASE \(name)")
    return ScratchDatabase(url: PostgresServerLog.url(try #require(testPostgresURL), naming: name), name: name)
  }

  func drop() async throws {
    try await Self.admin("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
  }

  /// Runs one statement on the test server's own database (or on `url`'s).
  static func admin(_ statement: String, on url: String? = nil) async throws {
    try await PostgresServerLog.administer([statement], url: try #require(url ?? testPostgresURL), logger: quietLogger)
  }
}

private func frame(_ text: String) -> Data { ServerLogCodec.frame(Data(text.utf8)) }

var quietLogger: Logger {
  var logger = Logger(label: "postgres-log-test")
  logger.logLevel = ProcessInfo.processInfo.environment["TEST_LOG"] != nil ? .info : .critical
  return logger
}

@Suite(
  "PostgreSQL log: fenced appends, snapshots, schema versions, gap-free positions under races",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PostgresServerLogTests {
  @Test("records and the snapshot survive a reconnect; a snapshot drops what it covers; truncate cuts the tail")
  func roundTrip() async throws {
    let database = try await ScratchDatabase.create()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    try await log.append((1...3).map { StoredRecord(position: UInt64($0), bytes: frame("r\($0)")) })
    try await log.append([StoredRecord(position: 4, bytes: frame("r4"))])
    try await log.saveSnapshot(StoredSnapshot(position: 2, bytes: Data("state@2".utf8)))
    try await log.append([StoredRecord(position: 5, bytes: frame("r5"))])
    try await log.truncate(after: 4)
    try await log.append([StoredRecord(position: 5, bytes: frame("r5'"))])
    await log.close()

    let reopened = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    let stored = try await reopened.load()
    #expect(stored.snapshot == StoredSnapshot(position: 2, bytes: Data("state@2".utf8)))
    #expect(stored.records.map(\.position) == [3, 4, 5])
    #expect(stored.records.last?.bytes == frame("r5'"))
    await reopened.close()
    try await database.drop()
  }

  @Test("a second server on the same database fails its first write; the first server's records stay")
  func fencing() async throws {
    let database = try await ScratchDatabase.create()
    let first = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    let second = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    try await first.append([StoredRecord(position: 1, bytes: frame("mine"))])
    await #expect(throws: ServerLogError.self) {
      try await second.append([StoredRecord(position: 1, bytes: frame("theirs"))])
    }
    await #expect(throws: ServerLogError.self) {
      try await second.append([StoredRecord(position: 3, bytes: frame("a gap"))])
    }
    try await first.append([StoredRecord(position: 2, bytes: frame("mine too"))])
    #expect(try await first.load().records.map(\.bytes) == [frame("mine"), frame("mine too")])
    await first.close()
    await second.close()
    try await database.drop()
  }

  @Test("one server per database: a second is refused in one line; nodes share it, the first starts the cluster")
  func claims() async throws {
    let database = try await ScratchDatabase.create()
    func connect() async throws -> PostgresServerLog {
      try await PostgresServerLog.connect(
        url: database.url,
        logger: quietLogger,
        operationTimeout: testTimeout(.seconds(5))
      )
    }
    let single = try await connect()
    let other = try await connect()
    try await single.claimForOneServer()
    for attempt in [{ try await other.claimForOneServer() }, { _ = try await other.claimPlaceInCluster() }] {
      let error = await #expect(throws: ServerLogError.self) { try await attempt() }
      #expect(error?.isSameKind(as: .inUse("")) == true && error?.description.contains("\n") == false)
    }
    await single.close()
    // Nodes: the first starts the cluster, the next joins it; a single server is then refused.
    let nodeA = try await connect()
    let nodeB = try await connect()
    #expect(try await nodeA.claimPlaceInCluster() == true)
    #expect(try await nodeB.claimPlaceInCluster() == false)
    await #expect(throws: ServerLogError.self) { try await other.claimForOneServer() }
    // When one node is gone the other still holds its place; when both are gone, the next starts it again.
    await nodeA.close()
    let nodeC = try await connect()
    #expect(try await nodeC.claimPlaceInCluster() == false)
    await nodeB.close()
    await nodeC.close()
    let nodeD = try await connect()
    #expect(try await nodeD.claimPlaceInCluster() == true)
    await nodeD.close()
    await other.close()
    try await database.drop()
  }

  @Test("a database written by a newer schema is refused with a clear error and left as it is")
  func newerSchema() async throws {
    let database = try await ScratchDatabase.create()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    try await log.append([StoredRecord(position: 1, bytes: frame("kept"))])
    await log.close()
    try await ScratchDatabase.admin("UPDATE event_log_meta SET schema_version = 99", on: database.url)
    do {
      _ = try await PostgresServerLog.connect(
        url: database.url,
        logger: quietLogger,
        operationTimeout: testTimeout(.seconds(5))
      )
      Issue.record("a newer schema was accepted")
    } catch {
      #expect(error.isSameKind(as: .newerFormat(found: 99, supported: 1)))
      #expect("\(error)".contains("99"))
    }
    try await ScratchDatabase.admin("UPDATE event_log_meta SET schema_version = 1", on: database.url)
    let reopened = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    #expect(try await reopened.load().records.map(\.bytes) == [frame("kept")])
    await reopened.close()
    try await database.drop()
  }

  @Test("racing appenders and readers: every reader sees positions 1, 2, 3… with none skipped or reordered")
  func gapFreeUnderRaces() async throws {
    let database = try await ScratchDatabase.create()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    let appenders = 6
    let batches = 40
    let sizes = (0..<appenders).map { appender in (0..<batches).map { (appender + $0) % 4 + 1 } }
    let total = sizes.joined().reduce(0, +)
    try await withThrowingTaskGroup(of: [String].self) { group in
      for appender in 0..<appenders {
        group.addTask {
          var sequence = 0
          for size in sizes[appender] {
            let payloads = (0..<size).map { offset in Data("\(appender)-\(sequence + offset)".utf8) }
            sequence += size
            _ = try await log.appendAssigningPositions(payloads)
          }
          return []
        }
      }
      for reader in 0..<3 {
        group.addTask {
          var seen: [String] = []
          var last: UInt64 = 0
          while seen.count < total {
            let records = try await log.records(after: last, limit: 5 + reader * 7)
            for record in records {
              guard record.position == last + 1 else {
                throw PositionSkipped(reader: reader, expected: last + 1, found: record.position)
              }
              last = record.position
              seen.append(String(decoding: record.bytes, as: UTF8.self))
            }
          }
          return seen
        }
      }
      var readings: [[String]] = []
      for try await result in group where !result.isEmpty { readings.append(result) }
      #expect(readings.count == 3)
      for reading in readings {
        #expect(reading == readings[0])
        #expect(Set(reading).count == total)
        // Each appender's records are in the order it appended them.
        for appender in 0..<appenders {
          let own = reading.filter { $0.hasPrefix("\(appender)-") }.map { Int($0.split(separator: "-")[1])! }
          #expect(own == Array(0..<own.count))
        }
      }
    }
    await log.close()
    try await database.drop()
  }

  @Test("a listener hears each append's last position when it commits, from another connection")
  func notifications() async throws {
    let database = try await ScratchDatabase.create()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    let (heard, continuation) = AsyncStream.makeStream(of: UInt64.self)
    let listening = Task { try await log.listenForAppends { continuation.yield($0) } }
    // LISTEN takes effect once its connection has sent it: append until the first hint arrives.
    var iterator = heard.makeAsyncIterator()
    var positions: [UInt64] = []
    let first = Task {
      for _ in 0..<100 {
        _ = try await log.appendAssigningPositions([Data("probe".utf8)])
        try await Task.sleep(for: .milliseconds(20))
      }
    }
    positions.append(try #require(await iterator.next()))
    first.cancel()
    _ = try? await first.value
    let range = try #require(try await log.appendAssigningPositions([Data("a".utf8), Data("b".utf8)]))
    while positions.last != range.upperBound, let next = await iterator.next() { positions.append(next) }
    #expect(positions.last == range.upperBound)
    // A single server's append (one statement: fence, insert, notify) notifies as well.
    let next = range.upperBound + 1
    try await log.append([
      StoredRecord(position: next, bytes: Data("c".utf8)), .init(position: next + 1, bytes: Data("d".utf8)),
    ])
    while positions.last != next + 1, let heard = await iterator.next() { positions.append(heard) }
    #expect(positions.last == next + 1)
    #expect(positions == positions.sorted())
    listening.cancel()
    try await listening.value
    await log.close()
    try await database.drop()
  }

  @Test("an EventServer recovers its state from PostgreSQL after a restart")
  func serverRecovers() async throws {
    let database = try await ScratchDatabase.create()
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    let (server, _) = try await EventServer.recovering(from: log, application: NoteBoard(), clock: ContinuousClock())
    let registration = try await server.register(user: "alice", eventTypes: nil, lifespan: nil, clientID: "phone")
    for index in 1...5 { try await server.handle(.post("note \(index)", to: ["alice"]), from: "bob") }
    await server.shutdown()
    await log.close()

    let reopened = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5))
    )
    let (restarted, report) = try await EventServer.recovering(
      from: reopened,
      application: NoteBoard(),
      clock: ContinuousClock()
    )
    #expect(report.replayed > 0)
    let queue = try #require(await restarted.queue(registration.queueID))
    let notes = queue.events.compactMap { envelope -> String? in
      guard case .payload(.note(let text)) = envelope.body else { return nil }
      return text
    }
    #expect(notes == (1...5).map { "note \($0)" })
    await restarted.shutdown()
    await reopened.close()
    try await database.drop()
  }

  @Test("a URL that is not one is a typed error naming it without its password")
  func badURL() async {
    for url in ["mysql://u@h/db", "postgres://h/db", "not a url", "postgres://u:secret@127.0.0.1/db?sslmode=maybe"] {
      do {
        _ = try await PostgresServerLog.connect(
          url: url,
          logger: quietLogger,
          operationTimeout: testTimeout(.seconds(5))
        )
        Issue.record("\(url) was accepted")
      } catch {
        #expect(!"\(error)".contains("secret"))
      }
    }
  }
}

struct PositionSkipped: Error, CustomStringConvertible {
  var reader: Int
  var expected: UInt64
  var found: UInt64
  var description: String { "reader \(reader) expected position \(expected), read \(found)" }
}
