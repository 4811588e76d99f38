import EventProtocol
import EventServer
import UpdateMachine

extension SimulationWorld {
  // MARK: - The server's nodes

  /// An empty server node for the domain, recording its decisions (for its log, or the cluster's).
  static func emptyNode(
    in domain: Domain.WorldState,
    random: inout SeededRandomNumberGenerator,
    now: Timestamp
  ) -> Server {
    var configuration = EventServerConfiguration()
    configuration.maximumIdleTimeout = .seconds(7 * 24 * 3600)
    var node = Server(
      application: Domain.makeApplication(in: domain),
      configuration: configuration,
      random: SeededRandomNumberGenerator(seed: random.next()),
      now: now
    )
    node.startRecording()
    return node
  }

  /// Time passed on the server being served: its heartbeats, sweeps, pushes and the application's deadlines.
  mutating func serverTimerFired() {
    let applicationDue = server.application.nextDeadline.map { $0 <= now } ?? false
    applyServer(server.timerFired(now: now))
    // The application's own deadlines (the episode queue's scheduled publications) change what users see
    // with no command.
    if applicationDue { recordVersions() }
  }

  /// With a cluster, a request (or the domain's own work on the server) reaches a node drawn at random:
  /// clients move between nodes. With one server, nothing to do.
  mutating func serveRandomNode() {
    guard let count = cluster?.count else { return }
    serveNode(Int.random(in: 0..<count, using: &clusterRandom))
  }

  /// Serves `node` from now on: it first applies what the others committed, completing its own parked polls.
  mutating func serveNode(_ node: Int) {
    let (actions, committed) = cluster!.serve(node, served: &server)
    if committed { turnCommitted() }
    applyServer(actions)
  }

  /// The served node's turn commits what it recorded; the other nodes follow a few milliseconds later.
  mutating func commitTurn() {
    if cluster!.commit(from: &server) { turnCommitted() }
  }

  /// What a turn decided is in the shared log, durable: the other nodes follow, and the domain hears it as
  /// it hears a single server's group commit (the video domain deletes the blobs released).
  private mutating func turnCommitted() {
    scheduleFollowers()
    Domain.serverCommitted(in: &self)
  }

  mutating func scheduleFollowers() {
    for node in 0..<cluster!.count where node != cluster!.current {
      schedule(.nodeFollows(node: node), after: .microseconds(Int64.random(in: 500...5_000, using: &clusterRandom)))
    }
  }

  /// Commits the served node's turn and sets its timer.
  mutating func scheduleNodeTimer() {
    commitTurn()
    let next = server.nextDeadline
    guard next != cluster!.timerAt[cluster!.current] else { return }
    cluster!.timerAt[cluster!.current] = next
    events.push(.nodeTimer(node: cluster!.current), at: max(next, now))
  }

  /// Kills a cluster node: the polls parked on it fail as dropped connections, and it starts again from the
  /// log.
  mutating func killNode(_ node: Int) {
    note("cluster node \(node) is killed and starts again from the log")
    nodeLosesLeases(node)
    serveNode(node)
    let pollNode = cluster!.pollNode
    dropParkedPolls(because: "node killed") { pollNode[$0] == node }
    let empty = Self.emptyNode(in: domain, random: &clusterRandom, now: start)
    cluster!.killServed(&server, rebuiltFrom: empty)
    scheduleServerTimer()
  }
}
