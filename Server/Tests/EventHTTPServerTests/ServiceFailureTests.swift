import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Logging
import TestScheduling
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A server whose service fails before any shutdown ends with that error, so that `event-server` exits
/// non-zero and a supervisor (`Restart=on-failure`) sees it; a normal shutdown ends without one.
@Suite("A service that fails makes the server's run throw", .serialized, .hangGuard)
struct ServiceFailureTests {
  @Test("a port already taken: run throws (the process exits non-zero), after the state was written")
  func portTakenThrows() async throws {
    let taken = try TakenPort()
    defer { taken.close() }
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("taken-\(UUID())")
    defer { try? FileManager.default.removeItem(at: directory) }
    var configuration = EventHTTPServerConfiguration(keys: try APIKeys(["alice": "alice-secret-key"]))
    configuration.port = taken.port
    configuration.dataDirectory = directory
    configuration.snapshotInterval = nil
    var logger = Logger(label: "service-failure-test")
    logger.logLevel = .critical
    let server = EventHTTPServer(
      application: KanbanServer(team: ["alice"]),
      configuration: configuration,
      logger: logger
    )
    await #expect(throws: (any Error).self) { try await server.run(handleSignals: false) }

    // The same server on a free port, shut down normally: no error.
    configuration.port = 0
    let normal = EventHTTPServer(
      application: KanbanServer(team: ["alice"]),
      configuration: configuration,
      logger: logger
    )
    let (ports, bound) = AsyncStream.makeStream(of: Int.self)
    let running = Task { try await normal.run(handleSignals: false) { bound.yield($0) } }
    var iterator = ports.makeAsyncIterator()
    _ = try #require(await iterator.next())
    await normal.shutdown()
    try await running.value
  }
}

/// A TCP port on 127.0.0.1 held listening by this process.
private struct TakenPort {
  let descriptor: Int32
  let port: Int

  init() throws {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    self.descriptor = descriptor
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
    }
    guard bound == 0, listen(descriptor, 1) == 0 else { throw POSIXError(.EADDRINUSE) }
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
    }
    port = Int(UInt16(bigEndian: address.sin_port))
  }

  func close() { _ = Glibc.close(descriptor) }
}
