import EventProtocol
import Foundation
import JSONCoding
import SampleApps
import Testing
import UpdateMachineTesting

@testable import EventServer

@Suite("The input log: records, snapshots, recovery")
struct ServerLogTests {
  typealias Entry = ServerLogEntry<NoteBoard.Command>

  func entry(_ text: String, at seconds: Int64 = 0) -> Entry {
    Entry(
      time: t0.advanced(by: .seconds(seconds)),
      input: .commandHandled(user: alice, command: .post(text, to: [bob]))
    )
  }

  func records(_ entries: [Entry]) throws -> [StoredRecord] {
    try entries.enumerated().map { StoredRecord(position: UInt64($0 + 1), bytes: try ServerLogCodec.encode($1)) }
  }

  func rebuild(_ stored: StoredLog) throws(ServerLogError) -> (Machine, LogRecoveryReport) {
    try Machine.rebuilding(
      from: stored,
      application: NoteBoard(),
      random: SeededRandomNumberGenerator(seed: 1),
      now: t0
    )
  }

  @Test("a record cut at any length reads as torn; whole, it reads back")
  func everyCutLength() throws {
    let bytes = try ServerLogCodec.encode(entry("hello"))
    for length in 0..<bytes.count {
      let reading: ServerLogCodec.Reading<NoteBoard.Command> = try ServerLogCodec.decode(bytes.prefix(length), at: 1)
      guard case .torn = reading else {
        Issue.record("a record cut at \(length) of \(bytes.count) bytes was read")
        continue
      }
    }
    let whole: ServerLogCodec.Reading<NoteBoard.Command> = try ServerLogCodec.decode(bytes, at: 1)
    guard case .entry(let back) = whole, case .commandHandled(_, .post("hello", _)) = back.input else {
      Issue.record("the whole record did not read back")
      return
    }
  }

  @Test("a torn last record is ignored and reported where the storage can tear one; its predecessors are replayed")
  func tornTail() throws {
    var stored = StoredLog(
      snapshot: nil,
      records: try records([entry("a"), entry("b"), entry("c")]),
      lastRecordCanTear: true
    )
    stored.records[2].bytes = stored.records[2].bytes.dropLast(3)
    let (machine, report) = try rebuild(stored)
    #expect(machine.application.notes[bob] == ["a", "b"])
    #expect(report == LogRecoveryReport(snapshotPosition: 0, replayed: 2, lastPosition: 2, tornPosition: 3))
  }

  @Test("a damaged checksum: at the end of a file it is a torn write; with records after it the log is refused")
  func damagedChecksum() throws {
    var stored = StoredLog(
      snapshot: nil,
      records: try records([entry("a"), entry("b"), entry("c")]),
      lastRecordCanTear: true
    )
    stored.records[1].bytes[stored.records[1].bytes.count - 2] ^= 0x20
    #expect(throws: ServerLogError.damaged(position: 2)) { try rebuild(stored) }
    stored.records.removeLast()
    let (machine, report) = try rebuild(stored)
    #expect(machine.application.notes[bob] == ["a"])
    #expect(report.tornPosition == 2)
  }

  @Test("where a record cannot tear (a database row), a damaged or cut last record is refused, naming the remedy")
  func damagedLastRowRefused() async throws {
    for damage in [{ (bytes: inout Data) in bytes[bytes.count - 2] ^= 0x01 }, { $0 = $0.dropLast(3) }] {
      var stored = StoredLog(snapshot: nil, records: try records([entry("a"), entry("b"), entry("c")]))
      damage(&stored.records[2].bytes)
      #expect(throws: ServerLogError.damagedLastRecord(position: 3)) { try rebuild(stored) }
      let log = InMemoryServerLog(stored)
      let error = await #expect(throws: ServerLogError.self) {
        _ = try await EventServer.recovering(from: log, application: NoteBoard(), clock: ContinuousClock())
      }
      #expect(error?.description.contains("restore the data from a backup") == true)
      #expect(log.stored == stored)
    }
  }

  @Test("a snapshot carries a checksum: any one-bit flip is refused, never served as data")
  func snapshotChecksum() throws {
    var live = makeMachine()
    _ = try live.handle(.post("a", to: [bob]), from: alice, now: t0)
    let bytes = try live.snapshot(position: 1).encoded()
    var random = SeededRandomNumberGenerator(seed: 6)
    for _ in 0..<200 {
      var flipped = bytes
      let index = Int.random(in: 0..<bytes.count, using: &random)
      flipped[index] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &random)
      let stored = StoredLog(snapshot: StoredSnapshot(position: 1, bytes: flipped), records: [])
      #expect(throws: ServerLogError.self, "a flip at byte \(index) was accepted") { try rebuild(stored) }
    }
    let (machine, _) = try rebuild(StoredLog(snapshot: StoredSnapshot(position: 1, bytes: bytes), records: []))
    #expect(machine.application.notes[bob] == ["a"])
  }

  @Test("a damaged newest snapshot is replaced by the previous one and the records after it; without them, refused")
  func damagedSnapshotFallsBack() async throws {
    let log = InMemoryServerLog()
    let clock = ManualClock()
    let (server, _) = try await EventServer.recovering(
      from: log,
      application: NoteBoard(),
      clock: clock,
      anchor: t0,
      snapshots: .everyRecords(2)
    )
    for text in ["a", "b", "c", "d", "e"] { _ = try await server.handle(.post(text, to: [bob]), from: alice) }
    await server.shutdown()
    var stored = log.stored
    let newest = try #require(stored.snapshot)
    #expect(stored.previousSnapshot != nil)
    stored.snapshot?.bytes[newest.bytes.count / 2] ^= 0x04
    let (machine, report) = try rebuild(stored)
    #expect(machine.application.notes[bob] == ["a", "b", "c", "d", "e"])
    #expect(report.snapshotPosition == stored.previousSnapshot?.position)
    stored.previousSnapshot = nil
    #expect(throws: ServerLogError.damagedSnapshot(position: newest.position)) { try rebuild(stored) }
  }

  @Test("a snapshot an earlier build wrote (bare JSON, no checksum) is still read")
  func unframedSnapshotRead() throws {
    var live = makeMachine()
    _ = try live.handle(.post("a", to: [bob]), from: alice, now: t0)
    let json = try WireJSON.encodeData(live.snapshot(position: 1), sortedKeys: false)
    let (machine, _) = try rebuild(StoredLog(snapshot: StoredSnapshot(position: 1, bytes: json), records: []))
    #expect(machine.application.notes[bob] == ["a"])
  }

  @Test("a record or snapshot of a newer build is refused with a typed error, and the log is left as it was")
  func newerBuildRefused() async throws {
    var newer = try records([entry("a"), entry("b")])
    newer[1].bytes[0] = ServerLogCodec.currentVersion + 1
    let log = InMemoryServerLog(StoredLog(snapshot: nil, records: newer))
    await #expect(throws: ServerLogError.newerFormat(found: 2, supported: 1)) {
      _ = try await EventServer.recovering(from: log, application: NoteBoard(), clock: ContinuousClock())
    }
    #expect(log.stored.records == newer)

    var snapshot = Machine(application: NoteBoard(), random: SeededRandomNumberGenerator(seed: 1), now: t0)
      .snapshot(position: 0)
    snapshot.version = ServerSnapshot<NoteBoard>.currentVersion + 1
    let stored = StoredLog(snapshot: StoredSnapshot(position: 0, bytes: try snapshot.encoded()), records: [])
    let snapshotLog = InMemoryServerLog(stored)
    await #expect(throws: ServerLogError.newerFormat(found: 2, supported: 1)) {
      _ = try await EventServer.recovering(from: snapshotLog, application: NoteBoard(), clock: ContinuousClock())
    }
    #expect(snapshotLog.stored == stored)
  }

  @Test("a snapshot newer than the log: the server starts from the snapshot and continues after it")
  func snapshotNewerThanLog() throws {
    var live = makeMachine()
    _ = try live.handle(.post("a", to: [bob]), from: alice, now: t0)
    let snapshot = live.snapshot(position: 10)
    let stored = StoredLog(
      snapshot: StoredSnapshot(position: 10, bytes: try snapshot.encoded()),
      records: try records([entry("old 1"), entry("old 2")])
    )
    let (machine, report) = try rebuild(stored)
    #expect(machine.application.notes[bob] == ["a"])
    #expect(report == LogRecoveryReport(snapshotPosition: 10, replayed: 0, lastPosition: 10, tornPosition: nil))
  }

  @Test("records that do not follow the snapshot without a gap are refused")
  func gapRefused() throws {
    var stored = StoredLog(snapshot: nil, records: try records([entry("a"), entry("b"), entry("c")]))
    stored.records.remove(at: 1)
    #expect(throws: ServerLogError.gap(after: 1, next: 3)) { try rebuild(stored) }
  }

  @Test("group commit: records enqueued during a write share the next one; a snapshot follows its records")
  func groupCommit() {
    var commit = GroupCommit(durable: 4)
    let (first, write1) = commit.enqueue([Data([1])])
    #expect(first == 5)
    #expect(write1?.records.map(\.position) == [5])
    var expected = commit
    let (last, none) = commit.enqueue([Data([2]), Data([3])])
    #expect(none == nil)
    #expect(last == 7)
    #expect(commit.enqueueSnapshot(Data([9])) == nil)
    _ = expected.enqueue([Data([2]), Data([3])])
    _ = expected.enqueueSnapshot(Data([9]))
    #expect(commit == expected)
    let write2 = commit.writeSucceeded()
    #expect(commit.durable == 5)
    #expect(write2?.records.map(\.position) == [6, 7])
    #expect(write2?.snapshot == StoredSnapshot(position: 7, bytes: Data([9])))
    #expect(write2?.through == 7)
    #expect(commit.writeSucceeded() == nil)
    #expect(commit.durable == 7)
    #expect(!commit.isWriting)

    _ = commit.enqueue([Data([4])])
    commit.fail(.storage("disk full"))
    #expect(commit.failure == .storage("disk full"))
    #expect(commit.enqueue([Data([5])]).1 == nil)
    #expect(commit.durable == 7)
  }

  @Test("group commit: acknowledgements' answers wait for the last decision, not for themselves")
  func acknowledgementsWaitForLastDecision() {
    var commit = GroupCommit(durable: 4)
    #expect(commit.enqueue([Data([1])], acknowledgementsOnly: true).0 == 4)
    #expect(commit.enqueue([Data([2])]).0 == 6)
    #expect(commit.enqueue([Data([3]), Data([4])], acknowledgementsOnly: true).0 == 6)
    #expect(commit.appended == 8)
    #expect(commit.lastDecision == 6)
  }
}
