import EventProtocol
import EventServer

/// Which node of a simulated cluster serves each partition of users: the model of `PartitionHost`'s
/// advisory-lock leases, with the same rule (``PartitionLeasePlan``).
///
/// Each node looks at the leases on its own timer: below its fair share it takes free partitions, above it
/// lets the excess go. A node that dies loses its leases at once (its database session ends) and is down
/// for a while: the others' share grows and they take its partitions at their next look; back, it takes a
/// share again as the others let go of their excess. Until a node takes a free partition, its users'
/// requests are refused as a moving partition's are over HTTP (`503`, retried by the client).
///
/// In the simulation every node still applies every record: an in-memory application's state is one value,
/// which a partition cannot hold a part of. What the leases decide there is who serves whom, the gap while
/// a partition moves, and the polls a moving partition ends.
struct SimulatedLeases {
  /// How users map to partitions.
  let map: PartitionMap
  /// The node holding each partition's lease; `nil` while it is free.
  private(set) var holders: [Int?]
  /// How many nodes there are.
  let nodes: Int
  /// How many times a partition was taken by a node.
  private(set) var takes = 0
  /// How many times a partition was taken by another node than its last holder.
  private(set) var moves = 0
  /// The nodes down (killed, not started again yet): they hold nothing and do not look.
  private(set) var down: Set<Int> = []
  /// Each partition's last holder.
  private var lastHolders: [Int?]

  /// `partitions` partitions over `nodes` nodes, every lease free (the nodes take them at their first look).
  init(partitions: PartitionMap, nodes: Int) {
    self.map = partitions
    self.holders = Array(repeating: nil, count: partitions.count)
    self.lastHolders = holders
    self.nodes = nodes
  }

  /// The node serving `user`'s partition, if one holds it.
  func holder(of user: UserID) -> Int? { holders[map.partition(of: user)] }

  /// The partitions `node` holds.
  func held(by node: Int) -> Set<Int> { Set(holders.indices.filter { holders[$0] == node }) }

  /// `node` looks at the leases and follows the plan: it takes free partitions up to its share and lets go
  /// of those above it (every node is alive: a dead one starts again at once).
  /// - Returns: What it took and what it let go.
  mutating func look(by node: Int) -> (taken: [Int], released: [Int]) {
    guard !down.contains(node) else { return ([], []) }
    let mine = held(by: node)
    let others = Set(holders.indices.filter { holders[$0] != nil && holders[$0] != node })
    let plan = PartitionLeasePlan(
      partitions: map.count,
      liveNodes: nodes - down.count,
      mine: mine,
      heldByOthers: others,
      rotation: node
    )
    for partition in plan.release { holders[partition] = nil }
    let taken = plan.acquire.filter { holders[$0] == nil }
    for partition in taken {
      if let last = lastHolders[partition], last != node { moves += 1 }
      holders[partition] = node
      lastHolders[partition] = node
    }
    takes += taken.count
    return (taken, plan.release)
  }

  /// `node` died: every lease it held is free, and it is down (holds nothing, does not look) until
  /// ``nodeIsBack(_:)``; the others' share grows meanwhile, so they take its partitions.
  /// - Returns: The partitions it held.
  mutating func nodeDied(_ node: Int) -> [Int] {
    let lost = held(by: node).sorted()
    for partition in lost { holders[partition] = nil }
    down.insert(node)
    return lost
  }

  /// `node` runs again: it looks with the others, who let go of what is above their share.
  mutating func nodeIsBack(_ node: Int) {
    down.remove(node)
  }
}
