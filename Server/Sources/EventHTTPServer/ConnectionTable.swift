/// The open connections and who may take the next place: the pure decisions behind ``ConnectionLimits``.
///
/// Connections are numbered by the shell in the order they open. No clock: the shell asks
/// ``isStillUnauthenticated(_:)`` when a connection's unauthenticated time is up.
///
/// ```swift
/// var table = ConnectionTable(limits: limits)
/// switch table.opened(1, peer: "10.0.0.7") {
/// case .admitted(let evicted): evicted.forEach(close)   // the oldest unauthenticated, when full
/// case .refused: close(1)
/// }
/// ```
struct ConnectionTable: Sendable {
  enum Decision: Equatable, Sendable {
    /// Keep the connection; close the `evicted` ones (to make room).
    case admitted(evicted: [Int])
    /// Close it at once.
    case refused
  }

  let limits: ConnectionLimits
  private(set) var peers: [Int: String] = [:]
  /// The unauthenticated connections, oldest first.
  private(set) var unauthenticated: [Int] = []
  private var unauthenticatedByPeer: [String: Int] = [:]

  init(limits: ConnectionLimits) {
    self.limits = limits
  }

  /// How many connections are open.
  var count: Int { peers.count }

  /// A connection from `peer` opened.
  mutating func opened(_ id: Int, peer: String) -> Decision {
    guard unauthenticatedByPeer[peer, default: 0] < limits.maximumUnauthenticatedPerPeer else { return .refused }
    var evicted: [Int] = []
    while peers.count >= limits.maximumConnections {
      guard let oldest = unauthenticated.first else { return .refused }
      evicted.append(oldest)
      closed(oldest)
    }
    peers[id] = peer
    unauthenticated.append(id)
    unauthenticatedByPeer[peer, default: 0] += 1
    return .admitted(evicted: evicted)
  }

  /// A request on the connection passed authentication: it no longer counts against its peer, is not
  /// evicted for room, and its unauthenticated time no longer runs.
  mutating func authenticated(_ id: Int) {
    guard let peer = peers[id], let index = unauthenticated.firstIndex(of: id) else { return }
    unauthenticated.remove(at: index)
    release(peer)
  }

  /// Whether the connection is open and has not authenticated (its time is up: close it).
  func isStillUnauthenticated(_ id: Int) -> Bool {
    peers[id] != nil && unauthenticated.contains(id)
  }

  /// The connection closed.
  mutating func closed(_ id: Int) {
    guard let peer = peers.removeValue(forKey: id) else { return }
    if let index = unauthenticated.firstIndex(of: id) {
      unauthenticated.remove(at: index)
      release(peer)
    }
  }

  private mutating func release(_ peer: String) {
    unauthenticatedByPeer[peer, default: 1] -= 1
    if unauthenticatedByPeer[peer] == 0 { unauthenticatedByPeer[peer] = nil }
  }
}
