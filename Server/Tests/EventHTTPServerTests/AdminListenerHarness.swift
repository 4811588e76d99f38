import EventHTTPServer
import EventServer
import Foundation
import Testing

/// A server running in a test with its admin listener: its API and admin ports, and the task running it
/// (call `shutdown()` on the server, then await the task).
struct RunningWithAdmin {
  let port: Int
  let adminPort: Int
  let running: Task<Void, any Error>

  var admin: URL { URL(string: "http://127.0.0.1:\(adminPort)")! }

  /// Starts `server` (configured with `port` and `adminPort` 0) and waits until both listeners listen.
  static func start<Application>(_ server: EventHTTPServer<Application>) async throws -> RunningWithAdmin {
    let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
    let (adminPorts, adminContinuation) = AsyncStream.makeStream(of: Int.self)
    let running = Task {
      try await server.run(handleSignals: false) {
        portContinuation.yield($0)
      } onAdminRunning: {
        adminContinuation.yield($0)
      }
    }
    var portIterator = ports.makeAsyncIterator()
    var adminIterator = adminPorts.makeAsyncIterator()
    let port = try #require(await portIterator.next())
    let adminPort = try #require(await adminIterator.next())
    return RunningWithAdmin(port: port, adminPort: adminPort, running: running)
  }
}
