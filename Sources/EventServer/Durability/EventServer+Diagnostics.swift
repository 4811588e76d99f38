import EventProtocol

extension EventServer {
  /// One line saying what this server is waiting for: its timer, its next deadline, and on a cluster node
  /// the turn under way, the decisions and stored inputs waiting, the follower, a deadline look, failing
  /// fast, rebuilding. For an operator's log and for a test that waits too long to say why; the format is
  /// for people and may change.
  public var waitDiagnostics: String {
    var parts = [
      "now \(timeline.now())",
      "next deadline \(machine.nextDeadline)",
      "timer \(timerDeadline.map { "\($0)" } ?? "none")",
      "parked polls \(machine.parkedPollCount)",
      "stored inputs waiting \(storedBatches.waiting.count)",
    ]
    if let relay = machine.application as? any StagedDeadlines {
      parts.append("application deadline \(relay.deadline.map { "\($0)" } ?? "none")")
      if let due = relay.deadlineDue { parts.append("application deadline due since \(due)") }
    }
    if let durability = deployment.durability {
      parts.append("durable through \(durability.commit.durable)")
      if durability.commit.isWriting { parts.append("writing") }
      if let failure = durability.commit.failure { parts.append("log failed: \(failure)") }
    }
    if let node = deployment.clusterNode {
      parts += [
        "\(node.turns)",
        "decisions waiting \(node.waiting.count)",
        "deadline look under way \(node.deadlineLookUnderWay)",
        "follower \(node.follower.map { $0.isCancelled ? "cancelled" : "running" } ?? "none")",
        "announced \(node.log.shared.announcedPosition)",
      ]
    }
    return parts.joined(separator: "; ")
  }
}

/// What a stored application's relay holds of its deadlines (for ``EventServer/waitDiagnostics``).
protocol StagedDeadlines {
  var deadline: Timestamp? { get }
  var deadlineDue: Timestamp? { get }
}

extension StoredRelay: StagedDeadlines {}
