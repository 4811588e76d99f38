import EventProtocol
import EventServer
import Foundation
import SQLiteNIO
import TestScheduling
import Testing

@testable import EventHTTPServer
@testable import SQLiteServerLog

/// A fresh folder for one test's database, removed afterwards.
private struct ScratchFolder {
  let url = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-log-\(UUID())")
  var databasePath: String { url.appendingPathComponent("log.sqlite").path }
  func remove() { try? FileManager.default.removeItem(at: url) }
}

private func records(_ positions: ClosedRange<Int>, tag: String = "r") -> [StoredRecord] {
  positions.map { StoredRecord(position: UInt64($0), bytes: ServerLogCodec.frame(Data("\(tag)\($0)".utf8))) }
}

@Suite("SQLite log: group writes all or nothing, snapshots, truncation, schema versions, damaged files")
struct SQLiteServerLogTests {
  @Test("records and the snapshot survive a reopen; a snapshot drops what it covers; truncate cuts the tail")
  func roundTrip() async throws {
    let folder = ScratchFolder()
    defer { folder.remove() }
    let log = try await SQLiteServerLog.open(path: folder.databasePath)
    try await log.append(records(1...3))
    // Larger than one statement holds: written as several statements in one transaction.
    try await log.append(records(4...1_203))
    try await log.saveSnapshot(StoredSnapshot(position: 2, bytes: Data("state@2".utf8)))
    try await log.truncate(after: 1_200)
    try await log.append(records(1_201...1_201, tag: "again"))
    await log.close()

    let reopened = try await SQLiteServerLog.open(path: folder.databasePath)
    let stored = try await reopened.load()
    #expect(stored.snapshot == StoredSnapshot(position: 2, bytes: Data("state@2".utf8)))
    #expect(stored.records.map(\.position) == Array(3...1_201).map(UInt64.init))
    #expect(stored.records.first?.bytes == records(3...3)[0].bytes)
    #expect(stored.records.last?.bytes == records(1_201...1_201, tag: "again")[0].bytes)
    await reopened.close()
  }

  @Test(
    "a group holding a position already taken is refused whole, small (one statement) or large (several)",
    arguments: [3, 1_100]
  )
  func groupIsAllOrNothing(size: Int) async throws {
    let folder = ScratchFolder()
    defer { folder.remove() }
    let log = try await SQLiteServerLog.open(path: folder.databasePath)
    try await log.append(records(1...1, tag: "kept"))
    // Positions 2…size, then 1 again: every row but the last is new.
    var group = records(2...size, tag: "lost")
    group.append(records(1...1, tag: "overwrite")[0])
    await #expect(throws: ServerLogError.self) { try await log.append(group) }
    #expect(try await log.load().records == records(1...1, tag: "kept"))
    // The log goes on from where it was.
    try await log.append(records(2...2, tag: "next"))
    #expect(try await log.load().records.map(\.position) == [1, 2])
    await log.close()
  }

  @Test("a database written by a newer schema is refused with a clear error and left as it is")
  func newerSchema() async throws {
    let folder = ScratchFolder()
    defer { folder.remove() }
    let log = try await SQLiteServerLog.open(path: folder.databasePath)
    try await log.append(records(1...1, tag: "kept"))
    await log.close()
    try await setUserVersion(99, at: folder.databasePath)
    do {
      _ = try await SQLiteServerLog.open(path: folder.databasePath)
      Issue.record("a newer schema was accepted")
    } catch {
      #expect(error.isSameKind(as: .newerFormat(found: 99, supported: SQLiteServerLog.schemaVersion)))
      #expect("\(error)".contains("99"))
    }
    try await setUserVersion(SQLiteServerLog.schemaVersion, at: folder.databasePath)
    let reopened = try await SQLiteServerLog.open(path: folder.databasePath)
    #expect(try await reopened.load().records == records(1...1, tag: "kept"))
    await reopened.close()
  }

  @Test("a file that is not a database is a typed storage error, and the file is left as it was")
  func notADatabase() async throws {
    let folder = ScratchFolder()
    defer { folder.remove() }
    try FileManager.default.createDirectory(at: folder.url, withIntermediateDirectories: true)
    let garbage = Data(repeating: 0x5A, count: 8_192)
    try garbage.write(to: URL(fileURLWithPath: folder.databasePath))
    do {
      _ = try await SQLiteServerLog.open(path: folder.databasePath)
      Issue.record("a file of garbage opened as a log")
    } catch {
      #expect(error.isSameKind(as: .storage("")))
      #expect("\(error)".contains(folder.databasePath))
    }
    #expect(try Data(contentsOf: URL(fileURLWithPath: folder.databasePath)) == garbage)
  }

  @Test("the previous snapshot is kept with the records after it: a damaged newest one is replaced by them")
  func damagedSnapshotFallsBack() async throws {
    let folder = ScratchFolder()
    defer { folder.remove() }
    let log = try await SQLiteServerLog.open(path: folder.databasePath)
    let (server, _) = try await kanban(on: log, snapshots: .everyRecords(3))
    for card in 1...10 { _ = try await server.handle(CardMoved(card: "c\(card)", column: "done"), from: "alice") }
    await server.shutdown()
    let stored = try await log.load()
    let newest = try #require(stored.snapshot)
    let previous = try #require(stored.previousSnapshot)
    #expect(previous.position < newest.position)
    #expect(stored.records.first?.position == previous.position + 1)
    await log.close()
    // One bit of the newest snapshot flipped on disk.
    var damaged = newest.bytes
    damaged[damaged.count / 2] ^= 0x10
    try await execute(
      "UPDATE snapshot SET state = ? WHERE id = 1",
      [.blob(ByteBuffer(bytes: damaged))],
      at: folder.databasePath
    )
    let reopened = try await SQLiteServerLog.open(path: folder.databasePath)
    let (again, report) = try await kanban(on: reopened)
    #expect(report.snapshotPosition == previous.position)
    #expect(await again.application.board.columns.count == 10)
    await again.shutdown()
    await reopened.close()
  }

  @Test("a damaged last row is refused (a row cannot tear), naming the remedy, and nothing is deleted")
  func damagedLastRowRefused() async throws {
    let folder = ScratchFolder()
    defer { folder.remove() }
    let log = try await SQLiteServerLog.open(path: folder.databasePath)
    let (server, _) = try await kanban(on: log)
    for card in 1...3 { _ = try await server.handle(CardMoved(card: "c\(card)", column: "done"), from: "alice") }
    await server.shutdown()
    let before = try await log.load()
    await log.close()
    var last = try #require(before.records.last)
    last.bytes[last.bytes.count - 3] ^= 0x01
    try await execute(
      "UPDATE log SET record = ? WHERE position = ?",
      [.blob(ByteBuffer(bytes: last.bytes)), .integer(Int(last.position))],
      at: folder.databasePath
    )
    let reopened = try await SQLiteServerLog.open(path: folder.databasePath)
    let error = await #expect(throws: ServerLogError.self) {
      _ = try await kanban(on: reopened)
    }
    #expect(error == .damagedLastRecord(position: last.position))
    #expect(try await reopened.load().records.count == before.records.count)
    await reopened.close()
  }

  @Test("an older copy of the database put back, the server started within the same second: no event id repeats")
  func restoredCopyNeverRepeatsIDs() async throws {
    let folder = ScratchFolder()
    defer { folder.remove() }
    func start() async throws -> (EventServer<KanbanServer, ContinuousClock>, SQLiteServerLog) {
      let log = try await SQLiteServerLog.open(path: folder.databasePath)
      return (try await kanban(on: log).0, log)
    }
    func stop(_ running: (EventServer<KanbanServer, ContinuousClock>, SQLiteServerLog)) async {
      await running.0.shutdown()
      await running.1.close()
    }
    var running = try await start()
    let queue = try await running.0.register(user: "alice").queueID
    try await running.0.handle(CardMoved(card: "c1", column: "done"), from: "alice")
    let finger = try #require(
      try await running.0.events(queueID: queue, user: "alice", lastEventID: -1, dontBlock: true).last?.id
    )
    _ = try await running.0.events(queueID: queue, user: "alice", lastEventID: finger, dontBlock: true)
    await stop(running)
    // A copy of the database as the operator's backup holds it: the file and its WAL, if any.
    let files = [folder.databasePath, folder.databasePath + "-wal"]
    let copy = files.map { try? Data(contentsOf: URL(fileURLWithPath: $0)) }
    running = try await start()
    try await running.0.handle(CardMoved(card: "c2", column: "done"), from: "alice")
    let lostFinger = try #require(
      try await running.0.events(queueID: queue, user: "alice", lastEventID: finger, dontBlock: true).last?.id
    )
    await stop(running)
    for (path, bytes) in zip(files, copy) {
      try? FileManager.default.removeItem(atPath: path)
      try bytes?.write(to: URL(fileURLWithPath: path))
    }
    try? FileManager.default.removeItem(atPath: folder.databasePath + "-shm")
    running = try await start()
    try await running.0.handle(CardMoved(card: "c3", column: "done"), from: "alice")
    let fresh = try await running.0.events(queueID: queue, user: "alice", lastEventID: finger, dontBlock: true)
    #expect(!fresh.map(\.id).contains(lostFinger))
    await #expect(throws: EventAPIError.badEventQueueID(queue)) {
      _ = try await running.0.events(queueID: queue, user: "alice", lastEventID: lostFinger, dontBlock: true)
    }
    await stop(running)
  }

  /// The kanban server of `docs/serving.md` recovering from `log`.
  private func kanban(
    on log: SQLiteServerLog,
    snapshots: SnapshotSchedule = .byWork
  ) async throws -> (EventServer<KanbanServer, ContinuousClock>, LogRecoveryReport) {
    try await EventServer.recovering(
      from: log,
      application: KanbanServer(team: ["alice"]),
      clock: ContinuousClock(),
      snapshots: snapshots
    )
  }

  private func execute(_ sql: String, _ binds: [SQLiteData], at path: String) async throws {
    let connection = try await SQLiteConnection.open(storage: .file(path: path))
    _ = try await connection.query(sql, binds)
    try await connection.close()
  }

  private func setUserVersion(_ version: Int, at path: String) async throws {
    let connection = try await SQLiteConnection.open(storage: .file(path: path))
    _ = try await connection.query("PRAGMA user_version = \(version)")
    try await connection.close()
  }
}

@Suite("One server per data directory and database", .serialized, .hangGuard)
struct ExclusiveStorageTests {
  @Test("a second log on the same database is refused in one line while the first is open; free once it closes")
  func secondLogRefused() async throws {
    let folder = ScratchFolder()
    defer { folder.remove() }
    let first = try await SQLiteServerLog.open(path: folder.databasePath)
    try await first.append(records(1...2))
    let error = await #expect(throws: ServerLogError.self) {
      _ = try await SQLiteServerLog.open(path: folder.databasePath)
    }
    #expect(error?.isSameKind(as: .inUse("")) == true)
    #expect(error?.description.contains("stop it first") == true)
    #expect(error?.description.contains("\n") == false)
    await first.close()
    let second = try await SQLiteServerLog.open(path: folder.databasePath)
    #expect(try await second.load().records.map(\.position) == [1, 2])
    await second.close()
  }

  @Test("a close waits for the statement under way (it ends whole); a statement after the close is a typed error")
  func closeWaitsForStatements() async throws {
    let folder = ScratchFolder()
    defer { folder.remove() }
    let log = try await SQLiteServerLog.open(path: folder.databasePath)
    try await log.append(records(1...2))
    // A statement under way when the close begins, one row per step: between two steps it holds no lock of
    // SQLite's, so a close not waiting for it would be free to run (and return) while it goes on.
    let rows = 300_000
    let slow = Task {
      try await log.query(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < \(rows)) SELECT x FROM c"
      ).last?.column("x")?.integer
    }
    while log.statementsUnderWay == 0 { await Task.yield() }
    await log.close()
    // Closed only after the statement ended: none is left running on a closed connection.
    #expect(log.statementsUnderWay == 0)
    #expect(try await slow.value == rows)
    let error = await #expect(throws: ServerLogError.self) { try await log.append(records(3...3)) }
    #expect(error?.isSameKind(as: .storage("")) == true)
    #expect(error?.description.contains("closed") == true)
    let reopened = try await SQLiteServerLog.open(path: folder.databasePath)
    #expect(try await reopened.load().records.map(\.position) == [1, 2])
    await reopened.close()
  }

  @Test("a second event server on a data directory another serves is refused, and the first's data is untouched")
  func secondServerRefused() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let http = RawHTTP(base: live.url)
    #expect(try await http.send("POST", "api/v1/register", as: "alice").status == 200)
    await #expect(throws: StateError.self) {
      _ = try await LiveServer.start(dataDirectory: live.dataDirectory)
    }
    #expect(try await http.send("POST", "api/v1/register", as: "alice").status == 200)
    try await live.stop()
    let again = try await LiveServer.start(dataDirectory: live.dataDirectory)
    #expect(try await again.events.queueCount == 2)
    try await again.stop()
  }
}
