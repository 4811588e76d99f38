import EventProtocol
import Foundation
import SampleApps
import TestScheduling
import Testing
import UpdateMachineTesting

@testable import EventServer

@Suite("Snapshots by work: a restart's replay is bounded, through a crash loop too", .hangGuard)
struct SnapshotScheduleTests {
  func record(_ position: UInt64, bytes: Int) -> StoredRecord {
    StoredRecord(position: position, bytes: Data(repeating: 1, count: bytes))
  }

  @Test("the records after the loaded snapshot are owed, and a snapshot is due once they outweigh it")
  func debtAfterRecovery() {
    let stored = StoredLog(
      snapshot: StoredSnapshot(position: 2, bytes: Data(count: 500)),
      records: [record(1, bytes: 70), record(2, bytes: 70), record(3, bytes: 100), record(4, bytes: 100)],
      previousSnapshot: StoredSnapshot(position: 0, bytes: Data(count: 9))
    )
    let report = LogRecoveryReport(snapshotPosition: 2, replayed: 2, lastPosition: 4)
    let schedule = SnapshotSchedule(minimumRecords: 3, maximumRecords: 10)
    var debt = SnapshotDebt(schedule: schedule, after: stored, report: report)
    var expected = SnapshotDebt(schedule: schedule)
    expected.snapshotTaken(bytes: 500)
    expected.recorded(count: 2, bytes: 200)
    #expect(debt == expected)
    #expect(!debt.isDue)
    debt.recorded(count: 1, bytes: 100)
    #expect(!debt.isDue, "three records of 300 bytes do not outweigh a snapshot of 500")
    debt.recorded(count: 2, bytes: 200)
    #expect(debt.isDue)
    debt.snapshotTaken(bytes: 800)
    expected = SnapshotDebt(schedule: schedule)
    expected.snapshotTaken(bytes: 800)
    #expect(debt == expected)
  }

  @Test("the floor holds back a snapshot however heavy the records; the ceiling forces one however light")
  func floorAndCeiling() {
    var debt = SnapshotDebt(schedule: SnapshotSchedule(minimumRecords: 3, maximumRecords: 5))
    debt.recorded(count: 2, bytes: 1_000_000)
    #expect(!debt.isDue)
    debt.recorded(count: 1, bytes: 1)
    #expect(debt.isDue, "past the floor with no snapshot yet")
    debt.snapshotTaken(bytes: 1_000_000)
    debt.recorded(count: 4, bytes: 4)
    #expect(!debt.isDue)
    debt.recorded(count: 1, bytes: 1)
    #expect(debt.isDue, "the ceiling")

    var asked = SnapshotDebt(schedule: .onlyWhenAsked)
    asked.recorded(count: 1_000_000, bytes: 1 << 40)
    #expect(!asked.isDue)
    #expect(SnapshotSchedule(minimumRecords: 0, maximumRecords: -3) == .everyRecords(1))
  }

  @Test("40 kills, each after a few writes and never a shutdown: every restart replays within the bound")
  func crashLoopKeepsReplayBounded() async throws {
    let schedule = SnapshotSchedule(minimumRecords: 10, maximumRecords: 20)
    var disk = InMemoryServerLog()
    var replays: [Int] = []
    var posted: [String] = []
    for life in 0..<40 {
      let (server, report) = try await EventServer.recovering(
        from: disk,
        application: NoteBoard(),
        clock: ManualClock(start: t0),
        anchor: t0,
        random: SeededRandomNumberGenerator(seed: UInt64(life)),
        snapshots: schedule
      )
      replays.append(report.replayed)
      #expect(await server.application.notes[bob] ?? [] == posted)
      for index in 0..<7 {
        let text = "\(life).\(index)"
        _ = try await server.applyMutation(
          .post(text, to: [bob]),
          from: alice,
          clientID: "c",
          mutationID: MutationID(rawValue: UInt64(life * 7 + index + 1))
        )
        posted.append(text)
      }
      // Killed: what the log holds now is what the next life finds.
      disk = InMemoryServerLog(disk.stored)
    }
    // A life appends 7 writes and its recovery's record; a snapshot is due at 20 records at the latest, so
    // no restart replays more than 20 + 8 (without the count carried over a restart, each life's count
    // starts at 0, never reaches 20, and the replay grows by 8 a life).
    #expect(replays.max()! <= 28, "replays: \(replays)")
  }
}
