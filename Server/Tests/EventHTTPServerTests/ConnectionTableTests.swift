import EventProtocol
import Foundation
import TestScheduling
import Testing

@testable import EventHTTPServer

#if canImport(Glibc)
  import Glibc
#endif

/// The connection caps as pure decisions (``ConnectionTable``), then one user against a live server.
@Suite("Connections: one user cannot hold every place", .serialized, .hangGuard)
struct ConnectionTableTests {
  func limits(total: Int, perUser: Int) -> ConnectionLimits {
    var limits = ConnectionLimits()
    limits.maximumConnections = total
    limits.maximumConnectionsPerUser = perUser
    limits.maximumUnauthenticatedPerPeer = total
    return limits
  }

  @Test("a user holding every place: a new connection takes the place of that user's oldest")
  func fullTableEvictsHeaviestUser() {
    var table = ConnectionTable(limits: limits(total: 4, perUser: 4))
    for id in 0..<4 {
      #expect(table.opened(id, peer: "p") == .admitted(evicted: []))
      #expect(table.authenticated(id, as: "mallory") == [])
    }
    #expect(table.opened(4, peer: "q") == .admitted(evicted: [0]))
    #expect(table.authenticated(4, as: "bob") == [])
    // Bob's only connection is never taken for room; mallory's oldest go first.
    #expect(table.opened(5, peer: "q") == .admitted(evicted: [1]))
    #expect(table.authenticated(5, as: "carol") == [])
    #expect(table.opened(6, peer: "q") == .admitted(evicted: [2]))
    #expect(table.authenticated(6, as: "dave") == [])
    // Every user holds one: the next is refused.
    #expect(table.opened(7, peer: "q") == .refused)
    #expect(table.connectionsByUser == ["mallory": [3], "bob": [4], "carol": [5], "dave": [6]])
  }

  @Test("past the per-user cap, a user's own oldest connection is closed")
  func perUserCap() {
    var table = ConnectionTable(limits: limits(total: 100, perUser: 3))
    for id in 0..<3 {
      _ = table.opened(id, peer: "p")
      #expect(table.authenticated(id, as: "alice") == [])
    }
    _ = table.opened(3, peer: "p")
    #expect(table.authenticated(3, as: "alice") == [0])
    #expect(table.count == 3)
    #expect(table.connectionsByUser == ["alice": [1, 2, 3]])
  }

  @Test("a connection never admitted stays unauthenticated: evicted first, and its time runs out")
  func refusedConnectionIsUnauthenticated() {
    var table = ConnectionTable(limits: limits(total: 2, perUser: 2))
    _ = table.opened(0, peer: "p")
    #expect(table.authenticated(0, as: "alice") == [])
    _ = table.opened(1, peer: "p")  // its requests are answered 429: never marked
    #expect(table.isStillUnauthenticated(1))
    #expect(table.opened(2, peer: "p") == .admitted(evicted: [1]))
    table.closed(0)
    table.closed(2)
    #expect(table.count == 0 && table.connectionsByUser.isEmpty && table.unauthenticated.isEmpty)
  }

  @Test("random opens, admissions and closes keep every bound (seeded)", arguments: [1, 2, 3, 4, 5] as [UInt64])
  func boundsHold(seed: UInt64) {
    var random = SeededRandomNumberGenerator(seed: seed)
    let caps = limits(total: 12, perUser: 3)
    var table = ConnectionTable(limits: caps)
    var open: Set<Int> = []
    for id in 0..<2_000 {
      switch Int.random(in: 0..<3, using: &random) {
      case 0:
        if case .admitted(let evicted) = table.opened(id, peer: "p") {
          open.subtract(evicted)
          open.insert(id)
        }
      case 1:
        if let chosen = open.randomElement(using: &random) {
          let user = UserID(rawValue: ["a", "b", "c", "d"].randomElement(using: &random)!)
          open.subtract(table.authenticated(chosen, as: user))
        }
      default:
        if let chosen = open.randomElement(using: &random) {
          table.closed(chosen)
          open.remove(chosen)
        }
      }
      #expect(table.count == open.count)
      #expect(table.count <= caps.maximumConnections)
      #expect(table.connectionsByUser.values.allSatisfy { $0.count <= caps.maximumConnectionsPerUser })
      #expect(Set(table.peers.keys) == open)
    }
  }

  @Test("live: a user holding every connection, even past the rate limit, cannot keep another user out")
  func oneUserCannotLockOthersOut() async throws {
    let live = try await LiveServer.start { configuration in
      configuration.connections.maximumConnections = 24
      configuration.connections.maximumConnectionsPerUser = 24
      configuration.connections.maximumUnauthenticatedPerPeer = 64
      configuration.connections.unauthenticatedTimeout = .seconds(30)
      configuration.rateLimit = .init(burst: 8, perSecond: 0.01)
    }
    defer { live.removeData() }
    let port = live.port
    // Alice opens every place, each connection kept alive after one request (8 admitted, the rest 429).
    let held = await offThePool {
      (0..<40).compactMap { _ in KeptAliveConnection(to: port, user: "alice", key: testKeyByUser["alice"]!) }
    }
    #expect(held.count >= 24)
    let http = RawHTTP(base: live.url)
    let started = ContinuousClock.now
    for _ in 0..<5 {
      let answer = try await http.send("POST", "api/v1/register", as: "bob")
      #expect(answer.status == 200, "\(answer.text)")
    }
    #expect(ContinuousClock.now - started < .seconds(5))
    withExtendedLifetime(held) {}
    try await live.stop()
  }
}

/// A connection that sends one authenticated request, reads its answer and stays open (HTTP keep-alive).
final class KeptAliveConnection: Sendable {
  private let socket: Int32

  init?(to port: Int, user: String, key: String) {
    guard let socket = loopbackSocket(from: "127.0.0.1", to: port, receiveTimeoutSeconds: 5) else { return nil }
    self.socket = socket
    let credentials = Data("\(user):\(key)".utf8).base64EncodedString()
    let request =
      "GET /api/v1/events?queue_id=none&last_event_id=-1&dont_block=true HTTP/1.1\r\n"
      + "Host: 127.0.0.1\r\nAuthorization: Basic \(credentials)\r\n\r\n"
    let sent = request.withCString { send(socket, $0, strlen($0), 0) }
    var buffer = [UInt8](repeating: 0, count: 4096)
    guard sent > 0, recv(socket, &buffer, buffer.count, 0) > 0 else { return nil }
  }

  deinit {
    close(socket)
  }
}
