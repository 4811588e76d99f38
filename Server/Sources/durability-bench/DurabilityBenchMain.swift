import ArgumentParser
import CommandLineTool
import EventProtocol
import EventServer
import Foundation
import Logging
import PostgresServerLog
import SQLiteServerLog
import SampleApps

/// `durability-bench`: what durability costs. Acknowledged mutations per second and their latency (p50,
/// p99) from concurrent writers on an in-process server without a log, with an in-memory log (the group
/// commit's own cost) and with the SQLite log on disk; then the restart time of a server whose log holds N
/// records since its last snapshot. Prints figures; never a pass/fail timing.
@main
struct DurabilityBenchMain {
  static func main() async {
    let arguments = CommandLineTool.parse(DurabilityBenchArguments.self, tool: "durability-bench")
    let writers = arguments.quick ? 8 : arguments.writers
    let seconds = arguments.quick ? 1 : arguments.seconds
    let restartRecords = arguments.quick ? 20_000 : arguments.restartRecords
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("durability-bench-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: folder) }
    print(
      "durability-bench: \(ProcessInfo.processInfo.activeProcessorCount) cores; \(writers) writers, \(seconds) s each"
    )
    do {
      let memory = EventServer(application: NoteBoard(), configuration: .init(), clock: ContinuousClock())
      report("no log (in memory only)", try await measure(memory, writers: writers, seconds: seconds))
      let (inMemoryLog, _) = try await EventServer.recovering(
        from: InMemoryServerLog(),
        application: NoteBoard(),
        clock: ContinuousClock()
      )
      report(
        "in-memory log (group commit, no disk)",
        try await measure(inMemoryLog, writers: writers, seconds: seconds)
      )
      let sqlite = try await SQLiteServerLog.open(path: folder.appendingPathComponent("bench.sqlite").path)
      let (onDisk, _) = try await EventServer.recovering(
        from: sqlite,
        application: NoteBoard(),
        clock: ContinuousClock(),
        snapshots: .onlyWhenAsked
      )
      report("SQLite log (WAL, synchronous FULL)", try await measure(onDisk, writers: writers, seconds: seconds))
      await sqlite.close()
      let storedLog = try await SQLiteServerLog.open(path: folder.appendingPathComponent("stored.sqlite").path)
      let (stored, _) = try await EventServer.serving(
        StoredNoteBoard(),
        from: storedLog,
        clock: ContinuousClock(),
        snapshots: .onlyWhenAsked
      )
      report(
        "SQLite, stored note board (batched inputs)",
        try await measure(stored, writers: writers, seconds: seconds)
      )
      await stored.shutdown()
      await stored.waitForWrites()
      await storedLog.close()
      if let url = arguments.postgres {
        var logger = Logger(label: "durability-bench")
        logger.logLevel = .critical
        let postgres = try await PostgresServerLog.connect(url: url, logger: logger)
        let (onPostgres, _) = try await EventServer.recovering(
          from: postgres,
          application: NoteBoard(),
          clock: ContinuousClock(),
          snapshots: .onlyWhenAsked
        )
        report(
          "PostgreSQL log (synchronous_commit on)",
          try await measure(onPostgres, writers: writers, seconds: seconds)
        )
        await onPostgres.shutdown()
        await postgres.close()
        try await cluster(url: url, logger: logger, writers: writers, seconds: seconds)
        try await partitioned(url: url, logger: logger, writers: writers, seconds: seconds)
      }
      try await restart(records: restartRecords, in: folder)
    } catch {
      fail("\(error)")
    }
  }

  struct Figures {
    var count: Int
    var elapsed: Duration
    var latencies: [Duration]
  }

  /// `writers` tasks each send mutations one after another for `seconds`.
  static func measure(
    _ server: EventServer<NoteBoard, ContinuousClock>,
    writers: Int,
    seconds: Double
  ) async throws -> Figures {
    try await measure([server], writers: writers, seconds: seconds)
  }

  /// `writers` tasks each send mutations one after another for `seconds`, writer `i` to `servers[i % count]`.
  static func measure(
    _ servers: [EventServer<NoteBoard, ContinuousClock>],
    writers: Int,
    seconds: Double
  ) async throws -> Figures {
    try await measure(writers: writers, seconds: seconds) { writer, command, user, clientID, mutationID in
      _ = try await servers[writer % servers.count].applyMutation(
        command,
        from: user,
        clientID: clientID,
        mutationID: mutationID
      )
    }
  }

  /// The same on a server of the stored note board (its inputs batched per transaction, a savepoint each).
  static func measure(
    _ server: EventServer<StoredRelay<StoredNoteBoard>, ContinuousClock>,
    writers: Int,
    seconds: Double
  ) async throws -> Figures {
    try await measure(writers: writers, seconds: seconds) { _, command, user, clientID, mutationID in
      _ = try await server.applyMutation(.request(command), from: user, clientID: clientID, mutationID: mutationID)
    }
  }

  /// `writers` tasks each send mutations one after another for `seconds` through `write` (given the writer's
  /// number, the command, its user, client id and mutation id).
  static func measure(
    writers: Int,
    seconds: Double,
    write: @escaping @Sendable (Int, NoteBoard.Command, UserID, ClientID, MutationID) async throws -> Void
  ) async throws -> Figures {
    let clock = ContinuousClock()
    let start = clock.now
    // Each measurement writes as new installations: mutation ids restart at 1.
    let run = UInt32.random(in: 0...UInt32.max)
    let end = start + .milliseconds(Int64(seconds * 1000))
    let latencies = try await withThrowingTaskGroup(of: [Duration].self) { group in
      for writer in 0..<writers {
        group.addTask {
          var latencies: [Duration] = []
          var mutationID: UInt64 = 0
          let user = UserID("writer\(writer)")
          while clock.now < end {
            mutationID += 1
            let began = clock.now
            try await write(
              writer,
              .post("n\(mutationID)", to: [user]),
              user,
              ClientID(rawValue: "bench-\(run)-\(writer)"),
              MutationID(rawValue: mutationID)
            )
            latencies.append(clock.now - began)
          }
          return latencies
        }
      }
      var all: [Duration] = []
      for try await part in group { all += part }
      return all
    }
    return Figures(count: latencies.count, elapsed: clock.now - start, latencies: latencies.sorted())
  }

  /// Three cluster nodes on the PostgreSQL log (each with its own connections): how fast a node applies
  /// the log as it joins, the acknowledged writes through one node and through three, and the replication
  /// lag from a write acknowledged on one node to its event reaching a poll parked on another.
  static func cluster(url: String, logger: Logger, writers: Int, seconds: Double) async throws {
    var nodes: [EventServer<NoteBoard, ContinuousClock>] = []
    var logs: [PostgresServerLog] = []
    for index in 0..<3 {
      let log = try await PostgresServerLog.connect(url: url, logger: logger)
      let began = ContinuousClock.now
      let (node, joined) = try await EventServer.joining(
        log,
        application: NoteBoard(),
        clock: ContinuousClock(),
        replication: ReplicationSettings(snapshots: .onlyWhenAsked)
      )
      if index == 0 {
        let elapsed = Self.seconds(ContinuousClock.now - began)
        print(
          String(
            format: "  a node joining applies the log: %d records in %.2f s, %.0f records/s",
            joined.replayed,
            elapsed,
            Double(joined.replayed) / elapsed
          )
        )
      }
      nodes.append(node)
      logs.append(log)
    }
    for (name, writing) in [("writes on 1 node", [nodes[0]]), ("writes on 3 nodes", nodes)] {
      let cpuBefore = processCPUTime()
      let figures = try await measure(writing, writers: writers, seconds: seconds)
      report("PostgreSQL cluster, \(name)", figures)
      printCPU(processCPUTime() - cpuBefore, figures, of: "the 3 nodes (each applies every record)")
    }
    var lags: [Duration] = []
    let (writer, poller) = (nodes[0], nodes[1])
    let registration = try await poller.register(user: "lag")
    var last = registration.lastEventID
    for number in 1...200 {
      let parked = Task { [last] in
        let events = try await poller.events(queueID: registration.queueID, user: "lag", lastEventID: last)
        return (events, ContinuousClock.now)
      }
      await poller.waitForParkedPolls(count: 1)
      try await writer.handle(.post("lag-\(number)", to: ["lag"]), from: "lag")
      let acknowledged = ContinuousClock.now
      let (events, arrived) = try await parked.value
      last = events.last?.id ?? last
      lags.append(max(.zero, arrived - acknowledged))
    }
    lags.sort()
    print(
      String(
        format:
          "  replication lag (a write acknowledged on node 1 to its event in a poll parked on node 2, %d writes): "
          + "p50 %.3f ms   p99 %.3f ms",
        lags.count,
        Self.seconds(lags[lags.count / 2]) * 1000,
        Self.seconds(lags[lags.count * 99 / 100]) * 1000
      )
    )
    for (node, log) in zip(nodes, logs) {
      await node.shutdown()
      await log.close()
    }
  }

  /// Writes through a log of P partitions, each partition decided by its own cluster node (what a node
  /// holding the partition's lease runs), nodes being sets of partitions that share one connection pool:
  /// P = 1 on one node (today's cluster), then P = 4 and P = 16 on 1, 2 and 4 nodes. Each writer posts to itself, so
  /// its writes stay in its partition. Besides writes per second, the process's CPU time per acknowledged
  /// write: flat as nodes are added when no node does another partition's work. Each configuration runs on
  /// a database of its own, created on the same server and dropped afterwards.
  static func partitioned(url: String, logger: Logger, writers: Int, seconds: Double) async throws {
    for (partitionCount, nodeCount) in [(1, 1), (4, 1), (4, 2), (4, 4), (16, 1), (16, 2), (16, 4)] {
      let database = "bench_partitions_\(partitionCount)_\(nodeCount)_\(UInt32.random(in: 0...UInt32.max))"
      try await PostgresServerLog.administer(["CREATE DATABASE \(database)"], url: url, logger: logger)
      let scratchURL = PostgresServerLog.url(url, naming: database)
      let map = PartitionMap(count: partitionCount)!
      var nodeLogs: [PostgresServerLog] = []
      for _ in 0..<nodeCount {
        nodeLogs.append(try await PostgresServerLog.connect(url: scratchURL, logger: logger, partitions: map))
      }
      var views: [PostgresServerLog] = []
      var servers: [EventServer<NoteBoard, ContinuousClock>] = []
      for partition in 0..<partitionCount {
        let view = try nodeLogs[partition % nodeCount].partition(partition)
        let (server, _) = try await EventServer.joining(
          view,
          application: NoteBoard(),
          clock: ContinuousClock(),
          replication: ReplicationSettings(snapshots: .onlyWhenAsked)
        )
        views.append(view)
        servers.append(server)
      }
      let cpuBefore = processCPUTime()
      let databaseBefore = localPostgresCPUTime()
      let deciding = servers
      // Lock requests waiting in the database while the writers run (a turn waiting for a partition's
      // counter row is one): flat per write when no lock covers the log.
      async let waitingLocks = PostgresServerLog.meanWaitingLocks(
        url: scratchURL,
        logger: logger,
        every: .milliseconds(10),
        for: .seconds(seconds)
      )
      let figures = try await measure(writers: writers, seconds: seconds) { _, command, user, clientID, mutationID in
        _ = try await deciding[map.partition(of: user)].applyMutation(
          command,
          from: user,
          clientID: clientID,
          mutationID: mutationID
        )
      }
      report("PostgreSQL, \(partitionCount) partition(s) on \(nodeCount) node(s)", figures)
      var turns = 0
      for server in servers { turns += await server.turnsStarted }
      print("    turns: \(turns), \(figures.count / max(turns, 1)) writes per turn")
      let waiting = try await waitingLocks
      let writesPerSecond = Double(figures.count) / Self.seconds(figures.elapsed)
      print(
        String(
          format: "    lock requests waiting in the database: %.2f on average, %.1f µs of lock wait per write",
          waiting,
          waiting / max(writesPerSecond, 1) * 1_000_000
        )
      )
      printCPU(processCPUTime() - cpuBefore, figures, of: "the nodes")
      if let before = databaseBefore, let after = localPostgresCPUTime() {
        printCPU(after - before, figures, of: "PostgreSQL (its processes on this machine)")
      }
      for server in servers { await server.shutdown() }
      for view in views { await view.close() }
      for log in nodeLogs { await log.close() }
      try await PostgresServerLog.administer(
        ["DROP DATABASE IF EXISTS \(database) WITH (FORCE)"],
        url: url,
        logger: logger
      )
    }
  }

  /// Prints the CPU time per acknowledged write.
  static func printCPU(_ cpu: Double, _ figures: Figures, of whom: String) {
    let perWrite = Int((cpu / Double(max(figures.count, 1)) * 1_000_000).rounded())
    print("    CPU time of \(whom) per acknowledged write: \(perWrite) µs")
  }

  /// The CPU time of every PostgreSQL process on this machine (read from `/proc`), in seconds; `nil` when
  /// none runs here (a database on another machine).
  static func localPostgresCPUTime() -> Double? {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
    let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
    var total = 0.0
    var found = false
    for entry in entries where entry.allSatisfy(\.isNumber) {
      guard let name = try? String(contentsOfFile: "/proc/\(entry)/comm", encoding: .utf8),
        name.trimmingCharacters(in: .whitespacesAndNewlines) == "postgres",
        let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
      else { continue }
      // Fields after the command's closing parenthesis: state is the 3rd field, utime the 14th, stime the 15th.
      let fields = stat[stat.index(after: close)...].split(separator: " ")
      guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
      total += (user + system) / ticks
      found = true
    }
    return found ? total : nil
  }

  /// The user and system CPU time this process used, in seconds.
  static func processCPUTime() -> Double {
    var usage = rusage()
    getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
  }

  static func report(_ name: String, _ figures: Figures) {
    let perSecond = Double(figures.count) / seconds(figures.elapsed)
    func percentile(_ p: Double) -> String {
      guard !figures.latencies.isEmpty else { return "-" }
      let index = min(figures.latencies.count - 1, Int(Double(figures.latencies.count) * p))
      return String(format: "%.3f ms", seconds(figures.latencies[index]) * 1000)
    }
    let padded = name.padding(toLength: 40, withPad: " ", startingAt: 0)
    print(
      String(
        format: "  %@ %9.0f acknowledged mutations/s   p50 %@   p99 %@",
        padded,
        perSecond,
        percentile(0.5),
        percentile(0.99)
      )
    )
  }

  /// Writes `records` log records after an empty snapshot, then times a restart that replays them all.
  static func restart(records: Int, in folder: URL) async throws {
    let path = folder.appendingPathComponent("restart.sqlite").path
    let log = try await SQLiteServerLog.open(path: path)
    var position: UInt64 = 0
    var batch: [StoredRecord] = []
    let users = (0..<100).map { UserID("user\($0)") }
    let clock = ContinuousClock()
    let writing = clock.now
    for index in 0..<records {
      let user = users[index % users.count]
      let entry = ServerLogEntry<NoteBoard.Command>(
        time: Timestamp(secondsSinceEpoch: 1_700_000_000),
        input: .mutationReceived(
          user: user,
          clientID: ClientID(rawValue: "c-\(user.rawValue)"),
          mutationID: MutationID(rawValue: UInt64(index + 1)),
          digest: MutationDigest(rawValue: UInt64(index)),
          command: .post("note \(index)", to: [user])
        )
      )
      position += 1
      batch.append(StoredRecord(position: position, bytes: try ServerLogCodec.encode(entry)))
      if batch.count == 10_000 || index == records - 1 {
        try await log.append(batch)
        batch = []
      }
    }
    await log.close()
    let written = clock.now - writing
    let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    let reopened = try await SQLiteServerLog.open(path: path)
    // The read alone, to tell reading from replaying.
    let reading = clock.now
    let loaded = try await reopened.load()
    let readTime = clock.now - reading
    guard loaded.records.count == records else { fail("read \(loaded.records.count) records, not \(records)") }
    let began = clock.now
    let (server, report) = try await EventServer.recovering(
      from: reopened,
      application: NoteBoard(),
      clock: ContinuousClock(),
      snapshots: .onlyWhenAsked
    )
    let elapsed = clock.now - began
    let notes = await server.application.notes.values.reduce(0) { $0 + $1.count }
    await reopened.close()
    guard report.replayed == records, notes == records else {
      fail("the restart replayed \(report.replayed) records and holds \(notes) notes, not \(records)")
    }
    print(
      String(
        format:
          "  restart with %d records since the snapshot (%.0f MB): %.2f s (%.0f records/s), of which reading them %.2f s; writing them took %.2f s",
        records,
        Double(size) / 1_000_000,
        seconds(elapsed),
        Double(records) / seconds(elapsed),
        seconds(readTime),
        seconds(written)
      )
    )
  }

  static func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
  }

  static func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("durability-bench: \(message)\n".utf8))
    exit(2)
  }
}

/// The command line, as `swift-argument-parser` reads it.
struct DurabilityBenchArguments: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "durability-bench",
    abstract: "What durability costs: acknowledged writes per second and latency, and the restart time.",
    discussion: """
      Measures acknowledged mutations per second and latency p50/p99 with durability off, on an in-memory \
      log and on SQLite (WAL, synchronous FULL) in a temporary folder; then the restart time with N records \
      since the snapshot. Prints figures; never a pass/fail timing.
      """
  )

  @Option(help: "Concurrent writers.")
  var writers = 64
  @Option(help: "Seconds each measurement runs.")
  var seconds = 5.0
  @Option(name: .customLong("restart-records"), help: "Records in the log since the snapshot, for the restart.")
  var restartRecords = 1_000_000
  @Option(help: "Measure a PostgreSQL log too (an empty database: postgres://user@host:port/database).")
  var postgres: String?
  @Flag(help: "8 writers, 1 s, 20,000 records: for CI.")
  var quick = false

  func validate() throws {
    guard (1...100_000).contains(writers) else {
      throw ValidationError("--writers must be in 1...100000, not \(writers)")
    }
    guard seconds > 0, seconds <= 3600 else { throw ValidationError("--seconds must be in (0, 3600], not \(seconds)") }
    guard (1...100_000_000).contains(restartRecords) else {
      throw ValidationError("--restart-records must be in 1...100000000, not \(restartRecords)")
    }
  }
}
