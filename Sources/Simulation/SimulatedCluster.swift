import EventProtocol
import EventServer

/// The simulated server as several nodes on one shared log (``Scenario/nodes`` > 1): the
/// pure model of `EventServer.joining(_:…)` over a `SharedServerLog`.
///
/// The world serves one node at a time (its `server`), which is how a turn works: the node takes the log,
/// first applies every entry other nodes committed (``EventServerStateMachine/applyCommitted(_:)``, whose
/// completions of this node's parked polls the world delivers), then decides, and its recorded entries are
/// committed at once. The other nodes follow a few milliseconds later. A killed node loses its parked
/// polls and is rebuilt by replaying the whole log; nothing it answered can be lost, since nothing is
/// answered before it is in the log.
struct SimulatedCluster<Application: ServerApplication & Codable> {
  typealias Machine = EventServerStateMachine<Application>

  /// The nodes not being served; the served node's own slot holds a stale copy, replaced when it is parked.
  private var idle: [Machine]
  /// The node being served (the world's `server`).
  private(set) var current = 0
  /// The shared log: every entry any node committed, in order.
  private(set) var log: [ServerLogEntry<Application.Command>] = []
  /// How many entries each node applied.
  private(set) var applied: [Int]
  /// Each node's timer, as scheduled.
  var timerAt: [Timestamp?]
  /// The node each parked poll is parked on.
  var pollNode: [PollID: Int] = [:]
  /// How many nodes were killed.
  private(set) var kills = 0

  var count: Int { applied.count }

  /// A cluster of empty, recording nodes (each with its own random source); the world serves node 0 first
  /// and holds it as its `server` (its slot here is a stale copy).
  init(nodes: [Machine]) {
    idle = nodes
    applied = Array(repeating: 0, count: nodes.count)
    timerAt = Array(repeating: nil, count: nodes.count)
  }

  /// Whether every node applied every entry.
  var isCaughtUp: Bool { applied.allSatisfy { $0 == log.count } }

  /// Commits what the served node recorded; returns whether anything was.
  mutating func commit(from served: inout Machine) -> Bool {
    let entries = served.takeRecordedEntries()
    guard !entries.isEmpty else { return false }
    precondition(applied[current] == log.count, "node \(current) decided without having applied the log")
    log += entries
    applied[current] = log.count
    return true
  }

  /// Serves `node` from now on: commits what the served one recorded, parks it, takes `node` and applies
  /// what it missed.
  /// - Returns: The actions of `node`'s catching up (its parked polls completed), and whether the served
  ///   node had recorded entries (the other nodes must follow).
  mutating func serve(_ node: Int, served: inout Machine) -> (actions: [Machine.Action], committed: Bool) {
    let committed = commit(from: &served)
    if node != current {
      swap(&served, &idle[current])
      swap(&served, &idle[node])
      current = node
    }
    return (catchUp(&served), committed)
  }

  /// The served node applies every entry it has not.
  mutating func catchUp(_ served: inout Machine) -> [Machine.Action] {
    var actions: [Machine.Action] = []
    while applied[current] < log.count {
      actions += served.applyCommitted(log[applied[current]])
      applied[current] += 1
    }
    return actions
  }

  /// The served node dies and starts again: rebuilt by replaying the whole log. Its parked polls are gone
  /// (the world fails them as dropped connections).
  mutating func killServed(_ served: inout Machine, rebuiltFrom empty: Machine) {
    kills += 1
    var node = empty
    for entry in log { node.replay(entry) }
    node.startRecording()
    served = node
    applied[current] = log.count
    timerAt[current] = nil
    pollNode = pollNode.filter { $0.value != current }
  }
}
