import EventProtocol
import EventServer
import Foundation
import UpdateMachine
import UpdateMachineTesting

/// The fuzz targets. Each takes arbitrary bytes and must neither trap nor hang; a thrown typed error is a
/// pass. Chosen by the `FUZZ_TARGET` environment variable (see `Fuzz/run`).
enum FuzzTarget: String, CaseIterable {
  /// Response bodies through `WireFormat`, then whatever decoded fed to a live client core.
  case wire
  /// Queue dumps through `QueueDump.decode`, then restored into a server core and polled.
  case dump
  /// Persisted records through `PersistedRecord.restore`, then loaded into a client core and driven.
  case record
  /// The bytes as a schedule of steps for client cores and a server core in a `LoopbackWorld`.
  case machines

  func run(_ data: Data) {
    switch self {
    case .wire: Self.fuzzWire(data)
    case .dump: Self.fuzzDump(data)
    case .record: Self.fuzzRecord(data)
    case .machines: Self.fuzzMachines(data)
    }
  }

  /// A client core that has registered on queue `q` and is long-polling.
  private static func liveCore() -> FuzzCore {
    var core = FuzzCore(reducer: FuzzReducer(), random: SeededRandomNumberGenerator(seed: 1))
    _ = core.loaded(nil, now: fuzzStart)
    let registration = Registration(queueID: "q", lastEventID: -1, longPollTimeout: nil, snapshot: FuzzState(texts: []))
    _ = core.registerSucceeded(RequestID(rawValue: 1), registration, now: fuzzStart)
    return core
  }

  static func fuzzWire(_ data: Data) {
    if let reply = try? WireFormat.decode(EventsReply<FuzzEvent>.self, from: data) {
      var core = liveCore()
      _ = core.pollSucceeded(RequestID(rawValue: 2), reply.events, now: fuzzStart)
      _ = core.timerFired(now: fuzzStart.advanced(by: .seconds(1)))
    }
    if let registration = try? WireFormat.decode(Registration<FuzzState>.self, from: data) {
      var core = FuzzCore(reducer: FuzzReducer(), random: SeededRandomNumberGenerator(seed: 1))
      _ = core.loaded(nil, now: fuzzStart)
      _ = core.registerSucceeded(RequestID(rawValue: 1), registration, now: fuzzStart)
      _ = core.nextWakeUp(after: fuzzStart)
      _ = try? core.persistedRecord().encoded()
    }
    do {
      _ = try WireFormat.decode(EmptySnapshot.self, from: data)
    } catch {
      var core = liveCore()
      _ = core.pollFailed(RequestID(rawValue: 2), .api(error), now: fuzzStart)
      _ = core.nextWakeUp(after: fuzzStart)
    }
  }

  static func fuzzDump(_ data: Data) {
    guard let dump = try? QueueDump<FuzzEvent>.decode(data) else { return }
    var server = FuzzServer(application: FuzzBoard(), random: SeededRandomNumberGenerator(seed: 2), now: fuzzStart)
    guard (try? server.restore(dump, now: fuzzStart)) != nil else { return }
    var pollID: UInt64 = 0
    for queue in dump.queues {
      for lastEventID in [queue.prunedThrough, queue.lastEventID, queue.lastEventID &- 1, -1] {
        pollID += 1
        _ = server.poll(
          PollID(pollID),
          queueID: queue.id,
          user: queue.user,
          lastEventID: lastEventID,
          dontBlock: true,
          now: fuzzStart
        )
      }
      _ = try? server.handle(.post("after restore", to: [queue.user]), from: queue.user, now: fuzzStart)
    }
    for record in dump.mutations {
      let command = FuzzBoard.Command.post("again", to: [record.source.user])
      for decision in record.memory.decisions {
        _ = try? server.applyMutation(
          command,
          from: record.source.user,
          clientID: record.source.clientID,
          mutationID: decision.mutationID,
          digest: MutationDigest(of: command),
          now: fuzzStart
        )
      }
    }
    _ = server.timerFired(now: fuzzStart.advanced(by: .seconds(3600 * 24 * 400)))
    _ = try? QueueDump<FuzzEvent>.decode(WireFormat.encode(server.dump()))
  }

  static func fuzzRecord(_ data: Data) {
    let restoration = PersistedRecord<FuzzState, FuzzBoard.Command>.restore(from: data, for: FuzzReducer())
    for lifecycle in [AppLifecycle.foreground, .background] {
      var core = FuzzCore(reducer: FuzzReducer(), lifecycle: lifecycle, random: SeededRandomNumberGenerator(seed: 3))
      var now = fuzzStart
      _ = core.loaded(restoration.record, recovery: restoration.notes, now: now)
      _ = core.submit(.post("new", to: ["me"]), now: now)
      for step in [Duration.zero, .seconds(1), .seconds(90), .seconds(3600), .seconds(86_400 * 30)] {
        now = now.advanced(by: step)
        _ = core.timerFired(now: now)
        _ = core.freshness(now: now)
        _ = core.nextWakeUp(after: now)
      }
      _ = core.pushReceived(.init(queueID: "q", lastEventID: 5), now: now)
      _ = try? core.persistedRecord().encoded()
    }
  }

  static func fuzzMachines(_ data: Data) {
    var reader = ByteReader(bytes: ArraySlice(data))
    var world = LoopbackWorld(
      application: FuzzBoard(),
      reducer: { _ in FuzzReducer() },
      devices: ["a", "a", "b"],
      seed: reader.nextSeed()
    )
    var count = 0
    while !reader.isEmpty, count < 400 {
      count += 1
      let byte = reader.next()
      switch byte % 8 {
      case 0: world.submit(.post("w\(count)", to: ["a", "b"]), on: Int(byte / 8) % 3)
      case 1: world.submit(.refuse, on: Int(byte / 8) % 3)
      case 2: try? world.serverCommand(.post("s\(count)", to: ["a"]), from: "b")
      case 3: world.crash(Int(byte / 8) % 3)
      case 4: world.advance(to: world.now.advanced(by: .milliseconds(Int64(reader.next()) * 997)))
      case 5 where byte >= 128: world.crashServer()
      default: world.chaoticStep()
      }
    }
    if !world.runUntilSettled(maximumSteps: 5_000) {
      fatalError("the world did not settle:\n\(world.trace.suffix(30).joined(separator: "\n"))")
    }
  }
}
