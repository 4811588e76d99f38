import EventProtocol
import EventServer

extension SimulationWorld {
  // MARK: - Partitions of a cluster (``Scenario/partitions``)

  /// How often each node looks at the leases (`PartitionHost.run(every:)` in a server: every second).
  static var leaseLookInterval: Duration { .seconds(1) }

  /// Each node's first look, at a moment of its own within the first interval.
  mutating func scheduleFirstLeaseLooks() {
    guard let leases else { return }
    for node in 0..<leases.nodes {
      schedule(.leaseLook(node: node), after: .milliseconds(Int64.random(in: 0..<1_000, using: &clusterRandom)))
    }
  }

  /// Serves the node that answers `user`'s requests: with partitions, the holder of the user's partition
  /// (the balancer's node forwards the request there); without, a node drawn at random.
  /// - Returns: Whether a node serves the user (not while the user's partition has no holder).
  mutating func serveNode(for user: UserID) -> Bool {
    guard let leases else {
      serveRandomNode()
      return true
    }
    guard let holder = leases.holder(of: user) else { return false }
    serveNode(holder)
    return true
  }

  /// `node` looks at the leases: takes free partitions up to its share, lets go of those above it (the polls
  /// parked on it for their users end, as when a server stops a partition's node), and looks again an
  /// interval later.
  mutating func leaseLook(by node: Int) {
    let (taken, released) = leases!.look(by: node)
    if !taken.isEmpty { note("cluster node \(node) takes partitions \(taken)") }
    if !released.isEmpty {
      note("cluster node \(node) lets partitions \(released) go")
      let map = leases!.map
      let moved = Set(released)
      let ending = parkedPolls.keys.sorted().filter { pollID in
        cluster!.pollNode[pollID] == node
          && moved.contains(map.partition(of: devices[parkedPolls[pollID]!.device].user))
      }
      if !ending.isEmpty {
        // The node stops serving the partitions: their parked polls end (the clients poll again, reaching the
        // new holder).
        serveNode(node)
        for pollID in ending { applyServer(server.pollCancelled(pollID, now: now)) }
      }
    }
    schedule(.leaseLook(node: node), after: Self.leaseLookInterval)
  }

  /// How long a killed node of a partitioned cluster is down before it looks at the leases again.
  static var nodeDowntime: Duration { .seconds(10) }

  /// A killed node's leases go with its session: its partitions have no holder until another node looks
  /// and takes them. It is back after ``nodeDowntime``.
  mutating func nodeLosesLeases(_ node: Int) {
    guard let lost = leases?.nodeDied(node) else { return }
    if !lost.isEmpty { note("cluster node \(node)'s partitions \(lost) are free") }
    schedule(.leaseNodeBack(node: node), after: Self.nodeDowntime)
  }

  /// A killed node runs again and takes part in the leases.
  mutating func leaseNodeBack(_ node: Int) {
    leases!.nodeIsBack(node)
    note("cluster node \(node) is back for the leases")
  }
}
