import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Logging
import SQLiteNIO
import Synchronization
import Testing
import UpdateMachine

#if canImport(Glibc)
  import Glibc
#endif

@Suite("A server restored from a backup: its clients notice, register again and converge to the restored state")
struct RestoreFromBackupTests {
  @Test(
    "a backup taken while serving (VACUUM INTO), writes after it, a restore: clients re-register and agree",
    arguments: [false, true]
  )
  func restore(stored: Bool) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("restore-\(UUID())")
    defer { try? FileManager.default.removeItem(at: directory) }
    let port = try #require(freeLoopbackPort())
    var configuration = EventHTTPServerConfiguration(
      keys: try APIKeys(["alice": "alice-secret-key", "bob": "bob-secret-key"])
    )
    configuration.port = port
    configuration.dataDirectory = directory
    configuration.snapshotInterval = nil
    var logger = Logger(label: "restore-test")
    logger.logLevel = .critical
    // The in-memory board (its state in the log's snapshots), or the stored one (its cards in a table of the
    // same database): one backup holds the queues and the data together either way.
    func startServer() async throws -> (RunningServer, Task<Void, any Error>) {
      let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
      let server: RunningServer
      let running: Task<Void, any Error>
      if stored {
        let storedServer = EventHTTPServer(
          storedApplication: StoredKanban(team: ["alice", "bob"]),
          configuration: configuration,
          logger: logger
        )
        server = RunningServer(databaseURL: storedServer.databaseURL, shutdown: { await storedServer.shutdown() })
        running = Task { try await storedServer.run(handleSignals: false) { continuation.yield($0) } }
      } else {
        let memoryServer = EventHTTPServer(
          application: KanbanServer(team: ["alice", "bob"]),
          configuration: configuration,
          logger: logger
        )
        server = RunningServer(databaseURL: memoryServer.databaseURL, shutdown: { await memoryServer.shutdown() })
        running = Task { try await memoryServer.run(handleSignals: false) { continuation.yield($0) } }
      }
      var iterator = ports.makeAsyncIterator()
      _ = await iterator.next()
      return (server, running)
    }
    var (server, running) = try await startServer()
    let alice = Client(user: "alice", port: port)
    let bob = Client(user: "bob", port: port)
    await alice.machine.start()
    await bob.machine.start()

    _ = await alice.machine.submit(CardMoved(card: "c1", column: "done"))
    #expect(await bob.waitFor { $0.columns == ["c1": "done"] })
    // The backup, as docs/reliability.md gives it: a consistent copy while the server runs.
    let database = try #require(server.databaseURL)
    let backup = directory.appendingPathComponent("backup.sqlite")
    let connection = try await SQLiteConnection.open(storage: .file(path: database.path))
    _ = try await connection.query("VACUUM INTO ?", [.text(backup.path)])
    try await connection.close()
    // A write acknowledged after the backup: the restore loses it.
    _ = await alice.machine.submit(CardMoved(card: "c2", column: "done"))
    _ = await alice.machine.waitUntilSettled()
    #expect(await bob.waitFor { $0.columns == ["c1": "done", "c2": "done"] })

    await server.shutdown()
    try await running.value
    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database.path + suffix) }
    try FileManager.default.copyItem(at: backup, to: database)
    (server, running) = try await startServer()

    for client in [alice, bob] {
      #expect(await client.waitFor { $0.columns == ["c1": "done"] }, "\(client.user) sees the restored state")
      #expect(client.registrations.current == 2, "\(client.user) registered again")
    }
    _ = await bob.machine.submit(CardMoved(card: "c3", column: "doing"))
    for client in [alice, bob] {
      #expect(await client.waitFor { $0.columns == ["c1": "done", "c3": "doing"] })
    }
    await alice.machine.stop()
    await bob.machine.stop()
    await server.shutdown()
    try await running.value
  }
}

/// A server under test, whichever application it serves.
private struct RunningServer: Sendable {
  let databaseURL: URL?
  let shutdown: @Sendable () async -> Void
}

/// One device of the kanban board, counting its registrations.
private final class Client: Sendable {
  let user: UserID
  let machine: UpdateMachine<Board, CardMoved, CardMoved>
  /// How many times it registered.
  let registrations = Count()

  final class Count: Sendable {
    private let value = Mutex(0)
    func increment() { value.withLock { $0 += 1 } }
    var current: Int { value.withLock { $0 } }
  }

  init(user: UserID, port: Int) {
    self.user = user
    var configuration = UpdateMachineConfiguration()
    configuration.backoff = BackoffPolicy(base: .milliseconds(50), cap: .milliseconds(500))
    configuration.outboxBackoff = BackoffPolicy(base: .milliseconds(50), cap: .milliseconds(500))
    let registrations = registrations
    machine = UpdateMachine(
      reducer: KanbanReducer(),
      transport: URLSessionTransport(
        baseURL: URL(string: "http://127.0.0.1:\(port)")!,
        credentials: .init(user: user, apiKey: "\(user.rawValue)-secret-key")
      ),
      store: InMemoryStore(),
      configuration: configuration,
      log: { event in
        if case .requestSucceeded(_, .register) = event { registrations.increment() }
      }
    )
  }

  /// Whether the machine's state came to satisfy `condition` within 60 s (a deadline, not a pace).
  func waitFor(_ condition: @escaping @Sendable (Board) -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(60)
    if let state = await machine.snapshot.state, condition(state) { return true }
    let stream = await machine.snapshots()
    return await withTaskGroup(of: Bool.self) { group in
      group.addTask {
        for await snapshot in stream where snapshot.state.map(condition) == true { return true }
        return false
      }
      group.addTask {
        try? await Task.sleep(until: deadline)
        return false
      }
      let first = await group.next() ?? false
      group.cancelAll()
      return first
    }
  }
}

/// A port free on 127.0.0.1 now (bound, read, released), for a server that must come back on the same one.
func freeLoopbackPort() -> Int? {
  let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  guard socket >= 0 else { return nil }
  defer { _ = Glibc.close(socket) }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  address.sin_port = 0
  var length = socklen_t(MemoryLayout<sockaddr_in>.size)
  let bound = withUnsafeMutablePointer(to: &address) { pointer in
    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0
    }
  }
  return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
}
