import EventProtocol
import Foundation

/// What a restart found in the log, beside the rebuilt server.
public struct LogRecoveryReport: Sendable, Hashable {
  /// The position of the snapshot the server started from (0: none).
  public var snapshotPosition: UInt64
  /// How many records were replayed after it.
  public var replayed: Int
  /// The last good position: the next record goes one after it.
  public var lastPosition: UInt64
  /// When the last record was torn (cut by a crash mid-write, so never acknowledged): its position. The
  /// shell truncates the log there before appending.
  public var tornPosition: UInt64?
}

extension EventServerStateMachine where Application: Codable {
  /// Rebuilds a server from what its log holds: the newest snapshot, then every record after it replayed in
  /// order. A torn last record is ignored (and reported, for the shell to cut off); a damaged record with
  /// others after it, a gap in positions, or a record or snapshot of a newer build is refused, and nothing
  /// is changed or deleted.
  ///
  /// The rebuilt server has not yet recovered: the shell starts recording, then calls ``recover(now:)``.
  /// - Parameters:
  ///   - stored: What ``ServerLog/load()`` returned.
  ///   - application: The application when the log holds no snapshot.
  ///   - configuration: Limits and timings.
  ///   - random: The source of queue ids and heartbeat jitter.
  ///   - now: The current time (used only when there is no snapshot).
  /// - Returns: The server and what was found.
  /// - Throws: ``ServerLogError``.
  public static func rebuilding(
    from stored: StoredLog,
    application: @autoclosure () -> Application,
    configuration: EventServerConfiguration = .init(),
    random: some RandomNumberGenerator & Sendable,
    now: Timestamp
  ) throws(ServerLogError) -> (Self, LogRecoveryReport) {
    var machine: Self
    var position: UInt64 = 0
    if let (snapshot, decoded) = try usableSnapshot(of: stored) {
      machine = try Self(snapshot: decoded, configuration: configuration, random: random)
      position = snapshot.position
    } else {
      machine = Self(application: application(), configuration: configuration, random: random, now: now)
    }
    let snapshotPosition = position
    let records = stored.records.filter { $0.position > snapshotPosition }
    var report = LogRecoveryReport(snapshotPosition: snapshotPosition, replayed: 0, lastPosition: position)
    for (index, record) in records.enumerated() {
      guard record.position == position + 1 else { throw .gap(after: position, next: record.position) }
      let reading: ServerLogCodec.Reading<Application.Command> = try ServerLogCodec.decode(
        record.bytes,
        at: record.position
      )
      switch reading {
      case .entry(let entry):
        machine.replay(entry)
        position = record.position
        report.replayed += 1
      case .torn:
        guard index == records.count - 1 else { throw .damaged(position: record.position) }
        guard stored.lastRecordCanTear else { throw .damagedLastRecord(position: record.position) }
        report.tornPosition = record.position
      }
    }
    report.lastPosition = position
    return (machine, report)
  }

  /// The snapshot to start from: the newest when its checksum holds; the previous one (whose records
  /// follow it in `stored`) when the newest is damaged; none when nothing was stored.
  /// - Throws: ``ServerLogError/damagedSnapshot(position:)`` when the newest is damaged and no previous one
  ///   is stored (or the records after it do not reach the newest), or the previous one is damaged too.
  private static func usableSnapshot(
    of stored: StoredLog
  ) throws(ServerLogError) -> (StoredSnapshot, ServerSnapshot<Application>)? {
    guard let snapshot = stored.snapshot else { return nil }
    do {
      return (snapshot, try checked(snapshot))
    } catch let error where error.isSameKind(as: .damagedSnapshot(position: 0)) {
      guard let previous = stored.previousSnapshot, previous.position < snapshot.position,
        stored.records.contains(where: { $0.position == snapshot.position })
      else { throw error }
      return (previous, try checked(previous))
    }
  }

  private static func checked(_ snapshot: StoredSnapshot) throws(ServerLogError) -> ServerSnapshot<Application> {
    let decoded = try ServerSnapshot<Application>.decode(snapshot.bytes, position: snapshot.position)
    guard decoded.position == snapshot.position else {
      throw .undecodable("snapshot labelled \(snapshot.position) holds position \(decoded.position)")
    }
    return decoded
  }
}
