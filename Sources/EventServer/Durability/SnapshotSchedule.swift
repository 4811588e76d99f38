import Foundation

/// When a durable server or cluster node writes a snapshot of its state by itself: by the work a restart
/// would redo, not by how long the server has been up.
///
/// A restart decodes the newest snapshot, then replays every record after it. With a schedule a snapshot is
/// due once at least ``minimumRecords`` records follow the last one *and* those records hold at least as many
/// bytes as the last snapshot did; or, whatever their size, once ``maximumRecords`` records follow it. The
/// replay a restart does is then never much larger than the snapshot it starts from (restart time stays
/// within about twice the snapshot's decoding, past the floor), and writing snapshots costs no more bytes
/// than the log appends between them. The count survives a restart: the records a server replayed on
/// starting are still behind its last snapshot, so a server killed again and again (a crash loop) writes a
/// snapshot as soon as that work is due, and its restarts do not grow.
///
/// ```swift
/// let (server, _) = try await EventServer.recovering(
///   from: log, application: NoteBoard(), clock: ContinuousClock(), snapshots: .byWork)
/// ```
///
/// A host may also snapshot on a timer and on shutdown (``EventServer/saveSnapshot()``); both reset the
/// count.
public struct SnapshotSchedule: Sendable, Hashable {
  /// No snapshot is due before this many records follow the last one.
  public var minimumRecords: Int
  /// A snapshot is due once this many records follow the last one, however small they are.
  public var maximumRecords: Int

  /// A schedule from its two bounds (each at least 1; `maximumRecords` at least `minimumRecords`).
  /// - Parameters:
  ///   - minimumRecords: The floor: no snapshot before this many records.
  ///   - maximumRecords: The ceiling: a snapshot after this many records at the latest.
  public init(minimumRecords: Int, maximumRecords: Int) {
    self.minimumRecords = max(minimumRecords, 1)
    self.maximumRecords = max(maximumRecords, self.minimumRecords)
  }

  /// The default: a snapshot once 1,000 records or more hold as many bytes as the last snapshot, and after
  /// 100,000 records at the latest.
  public static let byWork = SnapshotSchedule(minimumRecords: 1_000, maximumRecords: 100_000)

  /// A snapshot after every `count` records, whatever their size.
  /// - Parameter count: How many records between snapshots.
  /// - Returns: The schedule.
  public static func everyRecords(_ count: Int) -> SnapshotSchedule {
    SnapshotSchedule(minimumRecords: count, maximumRecords: count)
  }

  /// No snapshot but those the host asks for (``EventServer/saveSnapshot()``): for a benchmark that measures
  /// the replay of a given number of records.
  public static let onlyWhenAsked = SnapshotSchedule(minimumRecords: .max, maximumRecords: .max)
}

/// The records a server has appended or applied since its last snapshot, against its ``SnapshotSchedule``: a
/// pure counter the server's shell feeds and asks whether a snapshot is due.
struct SnapshotDebt: Sendable, Hashable {
  let schedule: SnapshotSchedule
  /// Records since the last snapshot (the replayed ones included, after a restart).
  private(set) var records: Int
  /// Their bytes.
  private(set) var bytes: Int
  /// The size of the last snapshot written or loaded (0: none yet).
  private(set) var snapshotBytes: Int

  /// The debt of a server started from `stored`: the records after the snapshot it loaded are still owed.
  init(schedule: SnapshotSchedule, after stored: StoredLog, report: LogRecoveryReport) {
    self.schedule = schedule
    var records = 0
    var bytes = 0
    for record in stored.records where record.position > report.snapshotPosition {
      records += 1
      bytes += record.bytes.count
    }
    self.records = records
    self.bytes = bytes
    let loaded = [stored.snapshot, stored.previousSnapshot].compactMap { $0 }
      .first { $0.position == report.snapshotPosition && report.snapshotPosition > 0 }
    self.snapshotBytes = loaded?.bytes.count ?? 0
  }

  /// A debt of nothing: a server whose state was just written or rebuilt from a snapshot it did not keep.
  init(schedule: SnapshotSchedule) {
    self.schedule = schedule
    self.records = 0
    self.bytes = 0
    self.snapshotBytes = 0
  }

  /// Records were appended or applied.
  mutating func recorded(count: Int, bytes: Int) {
    records += count
    self.bytes += bytes
  }

  /// Whether a snapshot is due now.
  var isDue: Bool {
    records >= schedule.maximumRecords || (records >= schedule.minimumRecords && bytes >= snapshotBytes)
  }

  /// A snapshot of `bytes` bytes was taken (it covers every record counted so far).
  mutating func snapshotTaken(bytes: Int) {
    records = 0
    self.bytes = 0
    snapshotBytes = bytes
  }
}
