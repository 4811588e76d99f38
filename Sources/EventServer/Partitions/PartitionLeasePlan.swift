/// Which partition leases a node takes or lets go after looking at the cluster: the rule that spreads a
/// log's partitions over the nodes alive, as a pure function of what the node saw.
///
/// Each node aims at its fair share, the partition count divided by the live nodes, rounded up. A node
/// below it tries free partitions (none is taken from a node that holds it: a lease moves only when its
/// holder lets it go or dies); a node above it lets the excess go, so that a node that joins finds free
/// partitions at the others' next look. A node that dies loses its leases with its database session, and
/// the others, now fewer, have a larger share and take them.
///
/// Each node tries the free partitions from its own starting point (`rotation`), so that nodes looking at
/// the same moment mostly try different ones; two trying the same one is harmless (one gets it).
///
/// ```swift
/// let plan = PartitionLeasePlan(partitions: 16, liveNodes: 2, mine: [], heldByOthers: Set(0..<8), rotation: 3)
/// // plan.acquire == [8, 9, 10, 11, 12, 13, 14, 15]
/// ```
public struct PartitionLeasePlan: Sendable, Hashable {
  /// Free partitions to try, in order, as many as the node is below its share.
  public var acquire: [Int]
  /// Partitions the node holds beyond its share, to let go.
  public var release: [Int]

  /// How many partitions each node aims to hold: `partitions` over `liveNodes`, rounded up.
  public static func fairShare(partitions: Int, liveNodes: Int) -> Int {
    let nodes = max(liveNodes, 1)
    return (partitions + nodes - 1) / nodes
  }

  /// The plan of a node holding `mine`, which saw `heldByOthers` leased to other nodes and `liveNodes` nodes
  /// alive (itself included).
  /// - Parameters:
  ///   - partitions: How many partitions the log has.
  ///   - liveNodes: The nodes alive, this one included (at least one is assumed).
  ///   - mine: The partitions this node holds.
  ///   - heldByOthers: The partitions other nodes hold.
  ///   - rotation: Where this node starts looking among the free partitions (any integer; a node's own
  ///     number spreads nodes apart).
  public init(partitions: Int, liveNodes: Int, mine: Set<Int>, heldByOthers: Set<Int>, rotation: Int) {
    let share = Self.fairShare(partitions: partitions, liveNodes: liveNodes)
    if mine.count > share {
      acquire = []
      release = Array(mine.sorted().suffix(mine.count - share))
      return
    }
    release = []
    guard mine.count < share, partitions > 0 else {
      acquire = []
      return
    }
    let start = ((rotation % partitions) + partitions) % partitions
    let free = (0..<partitions).lazy
      .map { (start + $0) % partitions }
      .filter { !mine.contains($0) && !heldByOthers.contains($0) }
    acquire = Array(free.prefix(share - mine.count))
  }
}
