import EventProtocol
import Foundation

extension EventServer {
  /// A cluster node's side of its ``SharedServerLog``: the decisions waiting for the next turn, the turn
  /// cycle, and how the node follows the log.
  ///
  /// A class owned by the server alone and never handed out, as ``Durability`` is: the server changes it in
  /// place on every turn, through the ``Deployment/clusterNode(_:_:)`` that holds it.
  final class ClusterNode {
    /// One input waiting for a turn: `run` performs it on the machine (in the turn), `fail` tells its caller
    /// that the turn could not be taken.
    struct Decision {
      let run: () -> Void
      let fail: (ServerLogError) -> Void
    }

    /// The log, as the kind of shared log it is (read once, when the node joins).
    let log: ClusterLog
    let settings: ReplicationSettings
    var waiting: [Decision] = []
    /// Whether a turn is under way and has decided, the rebuild after a lost outcome, the moment of failing
    /// fast: the turn cycle's machine.
    var turns = TurnCycle()
    /// Whether partition 0's look for a stored application's next deadline is under way.
    var deadlineLookUnderWay = false
    /// The latest time any applied or decided entry carries: decisions never go back in time, whatever
    /// the clocks of the nodes that wrote before.
    var latestTime: Timestamp
    var turnEndWaiters: [CheckedContinuation<Void, Never>] = []
    var follower: Task<Void, Never>?
    /// Rebuilds a machine from what the log holds: its stored state, the time now, the random source.
    typealias Rebuild = (StoredLog, Timestamp, any RandomNumberGenerator & Sendable) throws(ServerLogError) -> (
      Machine, LogRecoveryReport
    )
    /// Rebuilds the machine from what the log holds (see ``EventServer/startRejoining(after:)``).
    let rebuild: Rebuild
    var rejoinTask: Task<Void, Never>?
    var rejoinWaiters: [CheckedContinuation<Void, Never>] = []
    /// The last time the node had applied every position the log announced (for its replication lag).
    var caughtUpAt: Timestamp

    init(log: ClusterLog, settings: ReplicationSettings, latestTime: Timestamp, rebuild: @escaping Rebuild) {
      self.log = log
      self.settings = settings
      self.latestTime = latestTime
      self.rebuild = rebuild
      self.caughtUpAt = latestTime
    }
  }
}
