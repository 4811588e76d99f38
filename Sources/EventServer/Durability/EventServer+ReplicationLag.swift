import EventProtocol
import Foundation

/// How far a cluster node is behind its shared log (``EventServer/replicationLag``).
public struct ReplicationLag: Sendable, Hashable {
  /// Positions the log announced committed that the node has not applied yet.
  public var records: UInt64
  /// How long since the node last had every announced position applied: zero when it is caught up, and an
  /// upper bound on the age of the oldest record it has not applied otherwise.
  public var behindFor: Duration

  /// A lag of `records` positions, behind for `behindFor`.
  public init(records: UInt64, behindFor: Duration) {
    self.records = records
    self.behindFor = behindFor
  }
}

extension EventServer {
  /// This cluster node's replication lag, measured against the positions its log announced (PostgreSQL's
  /// notifications); `nil` for a single server. A node rebuilding itself is behind by everything it has not
  /// read again.
  public var replicationLag: ReplicationLag? {
    guard case .clusterNode(let durability, let node) = deployment else { return nil }
    let applied = durability.commit.durable
    let announced = node.log.shared.announcedPosition
    let now = timeline.now()
    guard announced > applied else {
      node.caughtUpAt = now
      return ReplicationLag(records: 0, behindFor: .zero)
    }
    return ReplicationLag(records: announced - applied, behindFor: now.sinceEpoch - node.caughtUpAt.sinceEpoch)
  }

  /// How many turns this cluster node has started (each takes the log's, or its partition's, append lock
  /// once); 0 for a single server. With the writes acknowledged, what a turn's batch holds on average.
  public var turnsStarted: Int { deployment.clusterNode?.turns.turnsStarted ?? 0 }

  /// Notes the time when the node has applied every position its log announced.
  func noteCaughtUpIfSo() {
    guard case .clusterNode(let durability, let node) = deployment,
      durability.commit.durable >= node.log.shared.announcedPosition
    else { return }
    node.caughtUpAt = timeline.now()
  }
}
