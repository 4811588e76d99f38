import EventProtocol
import Foundation
import SampleApps
import Synchronization
import TestScheduling
import Testing
import UpdateMachineTesting

@testable import EventServer

/// A shared log whose turns can be held: a turn begun while held waits until released (a database slower
/// than the log's deadline, as a partition host sees one while the partition moves).
final class HeldTurnsLog: SharedServerLog, Sendable {
  let base = InMemorySharedLog()
  private let held = Mutex<(holding: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

  func hold() { held.withLock { $0.holding = true } }

  func release() {
    let waiters = held.withLock { state in
      state.holding = false
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  func load() async throws(ServerLogError) -> StoredLog { try base.load() }
  func append(_ records: [StoredRecord]) async throws(ServerLogError) { try base.append(records) }
  func saveSnapshot(_ snapshot: StoredSnapshot) async throws(ServerLogError) { try base.saveSnapshot(snapshot) }
  func truncate(after position: UInt64) async throws(ServerLogError) { try base.truncate(after: position) }
  func claimForOneServer() async throws(ServerLogError) {}
  func records(after position: UInt64, limit: Int) async throws(ServerLogError) -> [StoredRecord] {
    try base.records(after: position, limit: limit)
  }
  func waitForAppends(after position: UInt64) async { await base.waitForAppends(after: position) }
  func claimPlaceInCluster() async throws(ServerLogError) -> Bool { try base.claimPlaceInCluster() }
  var announcedPosition: UInt64 { base.announcedPosition }

  func appendTurn(
    after position: UInt64,
    _ decide: @escaping @Sendable ([StoredRecord]) async throws(ServerLogError) -> [StoredRecord]
  ) async throws(ServerLogError) {
    await withCheckedContinuation { continuation in
      let wait = held.withLock { state in
        if state.holding { state.waiters.append(continuation) }
        return state.holding
      }
      if !wait { continuation.resume() }
    }
    try await base.appendTurn(after: position, decide)
  }
}

@Suite("A cluster node that stops answers its parked polls at once", .hangGuard)
struct ClusterNodeStopTests {
  /// A stopping node's parked polls are answered before its last turn, which records their
  /// acknowledgements: were they answered by that turn, a turn held by a slow database would strand them
  /// (a partition host gives up on a stopping node after twice the log's deadline, and its relayed polls
  /// waited for their heartbeat).
  @Test("a parked poll ends at shutdown even while the node's turns cannot run")
  func parkedPollEndsWhileTurnsAreHeld() async throws {
    let log = HeldTurnsLog()
    let clock = ManualClock(start: t0)
    let (node, _) = try await NoteNode.joining(
      log,
      application: NoteBoard(),
      clock: clock,
      anchor: t0,
      random: SeededRandomNumberGenerator(seed: 1)
    )
    let registration = try await node.register(user: bob)
    let poll = Task { try await node.events(queueID: registration.queueID, user: bob, lastEventID: -1) }
    await node.waitForParkedPolls(count: 1)
    log.hold()
    await node.shutdown()
    await #expect(throws: ServerLogError.self) { try await poll.value }
    log.release()
    await node.waitForWrites()
  }
}
