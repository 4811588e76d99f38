import EventProtocol

/// The open connections and who may take the next place: the pure decisions behind ``ConnectionLimits``.
///
/// Connections are numbered by the shell in the order they open. A connection is *unauthenticated* until a
/// request on it is admitted (authenticated **and** within its user's rate limit); then it belongs to that
/// user. No user may hold more than ``ConnectionLimits/maximumConnectionsPerUser``: one more closes that
/// user's oldest. When the table is full, a new connection takes the place of the oldest unauthenticated
/// one, or else of the oldest connection of the user holding the most (when that user holds more than one):
/// so one user, however many connections they open, cannot keep another out. No clock: the shell asks
/// ``isStillUnauthenticated(_:)`` when a connection's unauthenticated time is up.
///
/// ```swift
/// var table = ConnectionTable(limits: limits)
/// switch table.opened(1, peer: "10.0.0.7") {
/// case .admitted(let evicted): evicted.forEach(close)   // to make room, when full
/// case .refused: close(1)
/// }
/// table.authenticated(1, as: "alice").forEach(close)   // alice's oldest, past her cap
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
  /// Each authenticated connection's user.
  private var users: [Int: UserID] = [:]
  /// Each user's authenticated connections, oldest first.
  private(set) var connectionsByUser: [UserID: [Int]] = [:]

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
      guard let victim = unauthenticated.first ?? oldestOfHeaviestUser() else { return .refused }
      evicted.append(victim)
      closed(victim)
    }
    peers[id] = peer
    unauthenticated.append(id)
    unauthenticatedByPeer[peer, default: 0] += 1
    return .admitted(evicted: evicted)
  }

  /// The oldest connection of the user holding the most (the first such user by name on a tie), when that
  /// user holds more than one: a user's only connection is never taken for room.
  private func oldestOfHeaviestUser() -> Int? {
    var heaviest: (user: UserID, count: Int)?
    for (user, ids) in connectionsByUser {
      guard let current = heaviest else {
        heaviest = (user, ids.count)
        continue
      }
      if ids.count > current.count || (ids.count == current.count && user.rawValue < current.user.rawValue) {
        heaviest = (user, ids.count)
      }
    }
    guard let heaviest, heaviest.count > 1 else { return nil }
    return connectionsByUser[heaviest.user]?.first
  }

  /// A request on the connection was admitted for `user`: it no longer counts against its peer, its
  /// unauthenticated time no longer runs, and it counts against `user`.
  /// - Returns: The connections to close: `user`'s oldest, when this one takes them past their cap.
  mutating func authenticated(_ id: Int, as user: UserID) -> [Int] {
    guard let peer = peers[id] else { return [] }
    if let index = unauthenticated.firstIndex(of: id) {
      unauthenticated.remove(at: index)
      release(peer)
    } else if let previous = users[id] {
      guard previous != user else { return [] }
      forget(id, of: previous)
    }
    users[id] = user
    connectionsByUser[user, default: []].append(id)
    var evicted: [Int] = []
    while let held = connectionsByUser[user], held.count > limits.maximumConnectionsPerUser {
      evicted.append(held[0])
      closed(held[0])
    }
    return evicted
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
    if let user = users.removeValue(forKey: id) { forget(id, of: user) }
  }

  private mutating func forget(_ id: Int, of user: UserID) {
    connectionsByUser[user]?.removeAll { $0 == id }
    if connectionsByUser[user]?.isEmpty == true { connectionsByUser[user] = nil }
  }

  private mutating func release(_ peer: String) {
    unauthenticatedByPeer[peer, default: 1] -= 1
    if unauthenticatedByPeer[peer] == 0 { unauthenticatedByPeer[peer] = nil }
  }
}
