import EventServer
import Foundation
import SQLiteNIO
import SQLiteServerLog
import Testing

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
      #expect(error.isSameKind(as: .newerFormat(found: 99, supported: 1)))
      #expect("\(error)".contains("99"))
    }
    try await setUserVersion(1, at: folder.databasePath)
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

  private func setUserVersion(_ version: Int, at path: String) async throws {
    let connection = try await SQLiteConnection.open(storage: .file(path: path))
    _ = try await connection.query("PRAGMA user_version = \(version)")
    try await connection.close()
  }
}
