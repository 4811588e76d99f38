import ArgumentParser
import CommandLineTool
import EventProtocol
import EventServer
import Foundation
import Logging
import PostgresServerLog
import SQLiteServerLog
import SampleApps

/// `stored-scale`: whether a stored application's server grows with its data. Loads the stored note board's
/// table with a small and a large number of users' notes, then, in a fresh process for each, starts the
/// server on it and measures what grows with data in an in-memory application: the start-up time, the
/// process's resident memory, and the latency of registrations (a snapshot read), mutations and fetches.
/// Prints figures; never a pass/fail timing.
@main
struct StoredScaleMain {
  static func main() async {
    let arguments = CommandLineTool.parse(StoredScaleArguments.self, tool: "stored-scale")
    do {
      if let database = arguments.measure {
        try await measure(database: database, arguments: arguments)
      } else {
        try await compare(arguments)
      }
    } catch {
      FileHandle.standardError.write(Data("stored-scale: \(error)\n".utf8))
      exit(1)
    }
  }

  /// Loads each size and measures it in a child process (so the load's memory is not counted).
  static func compare(_ arguments: StoredScaleArguments) async throws {
    let sizes = arguments.quick ? [1_000, 20_000] : [arguments.users / 1_000, arguments.users]
    print(
      "stored-scale: \(ProcessInfo.processInfo.activeProcessorCount) cores; \(arguments.notesPerUser) notes per user; "
        + "\(arguments.samples) samples of each request"
    )
    print(
      "backend     users      rows  database  start-up  memory(RSS)  register p50/p99  mutation p50/p99  fetch p50/p99    writes/s (64 writers)"
    )
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("stored-scale-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: folder) }
    var backends: [(String, (Int) async throws -> String)] = [
      ("sqlite", { users in folder.appendingPathComponent("notes-\(users).sqlite").path })
    ]
    if let url = arguments.postgres {
      backends.append(("postgres", { users in try await scratchDatabase(url, name: "stored_scale_\(users)") }))
    }
    for (backend, place) in backends {
      for users in sizes {
        let database = try await place(users)
        progress("loading \(users) users into \(backend)")
        let started = ContinuousClock.now
        let rows = try await load(database: database, users: users, notesPerUser: arguments.notesPerUser)
        progress("loaded \(rows) rows in \(format(ContinuousClock.now - started))")
        let line = try runChild(arguments: arguments, database: database, users: users)
        print("\(backend.padding(toLength: 9, withPad: " ", startingAt: 0)) \(pad(users, 8)) \(pad(rows, 9))  \(line)")
      }
    }
  }

  /// Applies the board's schema and inserts `users` × `notesPerUser` notes in batches.
  static func load(database: String, users: Int, notesPerUser: Int) async throws -> Int {
    let log = try await open(database)
    do {
      try await fill(log, users: users, notesPerUser: notesPerUser)
    } catch {
      await close(log)
      throw error
    }
    await close(log)
    return users * notesPerUser
  }

  private static func fill(_ log: any TransactionalServerLog, users: Int, notesPerUser: Int) async throws {
    try await log.migrate(StoredNoteBoard.schema)
    let total = users * notesPerUser
    let batch = 200_000
    var start = 0
    while start < total {
      let end = min(start + batch, total)
      let sql =
        log.dialect == .sqlite
        ? """
        WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
        INSERT INTO notes (recipient, text) SELECT 'user' || (i % ?), 'note ' || i FROM n
        """
        : """
        INSERT INTO notes (recipient, text)
        SELECT 'user' || (i % ?), 'note ' || i FROM generate_series(?::bigint, ?::bigint - 1) AS i
        """
      let values: [SQLValue] =
        log.dialect == .sqlite
        ? [.integer(Int64(start)), .integer(Int64(end)), .integer(Int64(users))]
        : [.integer(Int64(users)), .integer(Int64(start)), .integer(Int64(end))]
      _ = try await log.transaction { transaction in try await transaction.execute(sql, values) }
      start = end
      if total > batch { progress("  \(end) of \(total) rows") }
    }
  }

  /// Runs this executable again with `--measure`, and returns the figures it printed.
  static func runChild(arguments: StoredScaleArguments, database: String, users: Int) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = [
      "--measure", database, "--users", "\(users)", "--samples", "\(arguments.samples)",
    ]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw StoredScaleError("the measuring process failed") }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
  }

  /// In the child: starts the server on the loaded database, and measures.
  static func measure(database: String, arguments: StoredScaleArguments) async throws {
    let startedAt = ContinuousClock.now
    let log = try await open(database)
    let (server, _) = try await EventServer.serving(StoredNoteBoard(), from: log, clock: ContinuousClock())
    let startUp = ContinuousClock.now - startedAt
    var random = SeededRandomNumberGenerator(seed: 1)
    var registrations: [(UserID, QueueID)] = []
    var registerTimes: [Duration] = []
    for _ in 0..<arguments.samples {
      let user = UserID("user\(Int.random(in: 0..<arguments.users, using: &random))")
      let start = ContinuousClock.now
      let registration = try await server.register(user: user)
      registerTimes.append(ContinuousClock.now - start)
      registrations.append((user, registration.queueID))
    }
    var mutationTimes: [Duration] = []
    for index in 0..<arguments.samples {
      let recipient = registrations[index % registrations.count].0
      let start = ContinuousClock.now
      _ = try await server.applyMutation(
        .request(.post("bench \(index)", to: [recipient])),
        from: "bench",
        clientID: ClientID(rawValue: "bench"),
        mutationID: MutationID(UInt64(index + 1))
      )
      mutationTimes.append(ContinuousClock.now - start)
    }
    var fetchTimes: [Duration] = []
    for index in 0..<arguments.samples {
      let (user, queueID) = registrations[index % registrations.count]
      let request = FetchRequest(narrow: StoredNoteBoard.notesNarrow, anchor: .newest, before: 20, after: 0)
      let start = ContinuousClock.now
      _ = try await server.fetch(request, queueID: queueID, user: user)
      fetchTimes.append(ContinuousClock.now - start)
    }
    // Acknowledged writes per second from 64 writers at once, for two seconds.
    let clock = ContinuousClock()
    let end = clock.now + .seconds(2)
    let writesStarted = clock.now
    let written = try await withThrowingTaskGroup(of: Int.self) { group in
      for writer in 0..<64 {
        group.addTask {
          var count = 0
          while clock.now < end {
            count += 1
            _ = try await server.applyMutation(
              .request(.post("rate \(count)", to: [UserID("user\(writer)")])),
              from: "rate",
              clientID: ClientID(rawValue: "rate-\(writer)"),
              mutationID: MutationID(UInt64(count))
            )
          }
          return count
        }
      }
      return try await group.reduce(0, +)
    }
    let writesPerSecond = Int(Double(written) / durationSeconds(clock.now - writesStarted))
    let size = databaseSize(database)
    await server.shutdown()
    await server.waitForWrites()
    await close(log)
    print(
      "\(size.padding(toLength: 8, withPad: " ", startingAt: 0))  \(format(startUp).padding(toLength: 8, withPad: " ", startingAt: 0))  "
        + "\(residentMegabytes()) MB".padding(toLength: 11, withPad: " ", startingAt: 0)
        + "  \(percentiles(registerTimes))  \(percentiles(mutationTimes))  \(percentiles(fetchTimes))  \(writesPerSecond)"
    )
  }

  static func open(_ database: String) async throws -> any TransactionalServerLog {
    if database.hasPrefix("postgres://") || database.hasPrefix("postgresql://") {
      var logger = Logger(label: "stored-scale")
      logger.logLevel = .critical
      return try await PostgresServerLog.connect(url: database, logger: logger)
    }
    return try await SQLiteServerLog.open(path: database)
  }

  static func close(_ log: any TransactionalServerLog) async {
    if let sqlite = log as? SQLiteServerLog { await sqlite.close() }
    if let postgres = log as? PostgresServerLog { await postgres.close() }
  }

  /// A fresh database `name` on the server of `url` (dropped first if there); returns its URL.
  static func scratchDatabase(_ url: String, name: String) async throws -> String {
    var logger = Logger(label: "stored-scale")
    logger.logLevel = .critical
    try await PostgresServerLog.administer(
      ["DROP DATABASE IF EXISTS \(name) WITH (FORCE)", "CREATE DATABASE \(name)"],
      url: url,
      logger: logger
    )
    return PostgresServerLog.url(url, naming: name)
  }

  static func databaseSize(_ database: String) -> String {
    guard !database.hasPrefix("postgres") else { return "-" }
    // The database file and its write-ahead log (not yet checkpointed into it).
    let bytes = [database, database + "-wal"].reduce(0) { total, path in
      total + ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int ?? 0)
    }
    return "\(bytes / 1_048_576) MB"
  }

  /// The process's resident set size, from /proc (Linux).
  static func residentMegabytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
      let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
      let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
    else { return -1 }
    return kilobytes / 1_024
  }

  static func percentiles(_ times: [Duration]) -> String {
    let sorted = times.sorted()
    guard !sorted.isEmpty else { return "-" }
    let p50 = sorted[sorted.count / 2]
    let p99 = sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
    return "\(format(p50))/\(format(p99))".padding(toLength: 16, withPad: " ", startingAt: 0)
  }

  static func format(_ duration: Duration) -> String {
    let milliseconds = Double(duration.components.seconds) * 1_000 + Double(duration.components.attoseconds) / 1e15
    if milliseconds >= 100 { return "\(Int(milliseconds.rounded())) ms" }
    // Two decimals, without String(format:) (it crashed in a release build on Linux).
    let hundredths = Int((milliseconds * 100).rounded())
    let fraction = hundredths % 100
    return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction) ms"
  }

  static func durationSeconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
  }

  static func pad(_ number: Int, _ width: Int) -> String {
    let text = "\(number)"
    return String(repeating: " ", count: max(0, width - text.count)) + text
  }

  static func progress(_ line: String) {
    FileHandle.standardError.write(Data("stored-scale: \(line)\n".utf8))
  }
}

struct StoredScaleError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

struct StoredScaleArguments: ParsableArguments {
  static let configuration = CommandConfiguration(
    commandName: "stored-scale",
    abstract: "Whether a stored application's server grows with its data: start-up, memory and latencies."
  )

  @Option(help: "Users in the large table (the small one has a thousandth of them).")
  var users = 1_000_000

  @Option(help: "Notes each user holds.")
  var notesPerUser = 3

  @Option(help: "Registrations, mutations and fetches measured for each size.")
  var samples = 300

  @Option(help: "Also measure on PostgreSQL (scratch databases are created on this server).")
  var postgres: String?

  @Flag(help: "A short run (1,000 and 20,000 users).")
  var quick = false

  @Option(help: .hidden)
  var measure: String?

  func validate() throws {
    guard users >= 1_000 else { throw ValidationError("--users must be at least 1000") }
    guard notesPerUser >= 1, samples >= 1 else {
      throw ValidationError("--notes-per-user and --samples must be positive")
    }
  }
}
