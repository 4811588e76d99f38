import EventProtocol
import Foundation
import SampleApps
import Synchronization
import UpdateMachine

/// `soak-client --app checklist [--teammate USER:KEY ...]`: one team's client for the cluster soak, against
/// `event-server --app checklist`. The device adds `--count` items (USER-1 … USER-N) to its team's checklist
/// through the outbox while nodes are killed and the database stops; every `--teammate` joined the team
/// before the writes, and registers (a new device, with nothing kept) at its own point during them, so
/// registrations race the team's writes.
///
/// Then every copy is checked against a fresh registration, read from the tables: each item the device added
/// is there once and in order, the device's count of writes in the tables is the number of items, and the
/// device's copy and every teammate's equal it. The result line has the crash soak's figures
/// (`soak-totals.py` adds them up), then the teammates'.
struct TeamSoak {
  typealias Machine = UpdateMachine<ChecklistSnapshot, ChecklistChange, ChecklistCommand>
  typealias Transport = URLSessionTransport<ChecklistSnapshot, ChecklistChange, ChecklistCommand>

  let options: Options
  let teammates: [HTTPCredentials]

  /// The engine's settings for a soak: retries every 100 ms to 1 s, so a node's death costs little.
  static var configuration: UpdateMachineConfiguration {
    var configuration = UpdateMachineConfiguration()
    configuration.backoff = BackoffPolicy(base: .milliseconds(100), cap: .seconds(1))
    configuration.outboxBackoff = BackoffPolicy(base: .milliseconds(100), cap: .seconds(1))
    return configuration
  }

  func run() async -> (String, Bool) {
    let registers = Mutex(0)
    let acknowledged = Mutex(0)
    let credentials = HTTPCredentials(user: options.user, apiKey: options.key)
    let writer = Machine(
      reducer: ChecklistReducer(user: options.user),
      transport: Transport(baseURL: options.server, credentials: credentials),
      store: FileStore(url: options.stateDirectory.appendingPathComponent("record.json")),
      configuration: Self.configuration,
      log: { event in
        guard case .requestSucceeded(_, let kind) = event else { return }
        switch kind {
        case .register: registers.withLock { $0 += 1 }
        case .submit: acknowledged.withLock { $0 += 1 }
        case .poll, .fetch: break
        }
      }
    )
    await writer.start()
    _ = await writer.submit(.join)
    for teammate in teammates { await Self.join(as: teammate, at: options.server) }

    let expected = (1...options.count).map { "\(options.user.rawValue)-\($0)" }
    var readers: [Machine] = []
    for (index, title) in expected.enumerated() {
      // Teammate j registers after j/(T+1) of the writes.
      let joining = teammates.indices.first { ($0 + 1) * expected.count / (teammates.count + 1) == index }
      if let joining { readers.append(await Self.register(as: teammates[joining], at: options.server)) }
      _ = await writer.submit(.add(title: title))
      try? await Task.sleep(for: .milliseconds(options.intervalMilliseconds))
    }

    // Every copy settles: the writer's outbox empty, every machine live and holding every item.
    let deadline = ContinuousClock.now + .seconds(options.timeoutSeconds)
    var converged = false
    while ContinuousClock.now < deadline {
      var settled = true
      for machine in [writer] + readers {
        let snapshot = await machine.snapshot
        let items = snapshot.confirmedState?.items.count ?? 0
        if !snapshot.pendingMutations.isEmpty || snapshot.freshness.freshness != .live || items < expected.count {
          settled = false
        }
      }
      if settled {
        converged = true
        break
      }
      try? await Task.sleep(for: .milliseconds(100))
    }
    let writerSnapshot = await writer.snapshot
    var readerStates: [ChecklistSnapshot?] = []
    for reader in readers {
      readerStates.append(await reader.snapshot.confirmedState)
      await reader.stop()
    }
    await writer.stop()

    // The tables, from a fresh registration (retried for 60 s: a node may be between a kill and its restart).
    let transport = Transport(baseURL: options.server, credentials: credentials)
    let checkStarted = ContinuousClock.now
    var server: ChecklistSnapshot?
    var lastError: TransportError?
    while server == nil {
      do {
        let registration = try await transport.register(eventTypes: ["checklist_change"], lifespan: nil, clientID: nil)
        server = registration.snapshot
        try? await transport.deleteQueue(registration.queueID)
      } catch {
        lastError = error
        if ContinuousClock.now - checkStarted > .seconds(60) { break }
        try? await Task.sleep(for: .milliseconds(200))
      }
    }
    guard let server else {
      return (
        "soak-client \(options.user): the server could not be reached to check its checklist for 60 s "
          + "(converged \(converged); last error: \(lastError.map { "\($0)" } ?? "none"))", false
      )
    }
    let titles = server.items.map(\.title).filter { $0.hasPrefix("\(options.user.rawValue)-") }
    let counts = Dictionary(titles.map { ($0, 1) }, uniquingKeysWith: +)
    let missing = expected.filter { counts[$0] == nil }.count
    let twice = counts.values.filter { $0 > 1 }.count
    let inOrder = titles == expected
    let counted = server.writes[options.user.rawValue] ?? 0
    let matches = writerSnapshot.confirmedState == server
    let readersMatching = readerStates.filter { $0 == server }.count
    // What differs, when a copy does: its items or its members' counts.
    func difference(_ copy: ChecklistSnapshot?) -> String {
      guard let copy, copy != server else { return copy == nil ? " (no copy)" : "" }
      let parts = [copy.items != server.items ? "items" : nil, copy.writes != server.writes ? "counts" : nil]
      return " (differs in \(parts.compactMap { $0 }.joined(separator: " and ")))"
    }
    let line =
      "soak-client \(options.user): written \(expected.count), acknowledged \(acknowledged.withLock { $0 }), "
      + "on server \(titles.count), lost \(missing), applied twice \(twice), in order \(inOrder), "
      + "client equals server \(matches)\(difference(writerSnapshot.confirmedState)), converged \(converged), registers \(registers.withLock { $0 }), "
      + "rejected \(writerSnapshot.rejectedMutations.count); writes counted \(counted), "
      + "teammates registered during the writes \(readers.count), equal to the server \(readersMatching)"
    let succeeded =
      converged && missing == 0 && twice == 0 && inOrder && matches && counted == expected.count
      && readersMatching == readers.count && writerSnapshot.rejectedMutations.isEmpty
    return (line, succeeded)
  }

  /// Joins `credentials`' user to their team, and waits until the join is acknowledged.
  static func join(as credentials: HTTPCredentials, at server: URL) async {
    let machine = await register(as: credentials, at: server)
    _ = await machine.submit(.join)
    let deadline = ContinuousClock.now + .seconds(120)
    while await !machine.snapshot.pendingMutations.isEmpty, ContinuousClock.now < deadline {
      try? await Task.sleep(for: .milliseconds(50))
    }
    await machine.stop()
  }

  /// A new device of `credentials`' user: it registers now and follows the team's writes.
  static func register(as credentials: HTTPCredentials, at server: URL) async -> Machine {
    let machine = Machine(
      reducer: ChecklistReducer(user: credentials.user),
      transport: Transport(baseURL: server, credentials: credentials),
      store: InMemoryStore(),
      configuration: configuration
    )
    await machine.start()
    return machine
  }
}
