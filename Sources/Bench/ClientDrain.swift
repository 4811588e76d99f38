import EventProtocol
import EventServer
import Foundation
import UpdateMachine

extension Workloads {
  /// C1: an `UpdateMachine` whose queue holds 100,000 video-status events drains them in polls of
  /// `pollBatchLimit`, applying and persisting each batch: in process with the in-memory and the file store,
  /// and through the JSON wire format with the in-memory store. The figure is the client's: the clock starts
  /// once the server's one command has queued the backlog (that command is W1's work); the rate with the
  /// command included is printed beside it.
  ///
  /// The app's own work grows with its state: the benchmark's reducer keeps every video's status, a
  /// dictionary of up to 100,000 entries that grows (and is encoded whole at each compaction) as the drain
  /// goes. The same drains with a reducer that keeps the latest status only (`LatestStatusReducer`) show what
  /// the library costs with an app whose state stays small.
  func clientDrain() async {
    let count = quick ? 10_000 : 100_000
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("bench-drain-\(UUID()).json")
    defer { try? FileManager.default.removeItem(at: url) }
    let memory: @Sendable () -> any UpdateStore = { InMemoryStore() }
    let file: @Sendable () -> any UpdateStore = {
      try? FileManager.default.removeItem(at: url)
      return FileStore(url: url)
    }
    let everyStatus = StatusReducer()
    let holdsEveryStatus: @Sendable (StatusBoard.Snapshot) -> Bool = { $0.statuses.count == count }
    await drains("drain_in_process_memory_store", " (target >= 5 M)", everyStatus, false, memory, holdsEveryStatus)
    await drains("drain_in_process_file_store", "", everyStatus, false, file, holdsEveryStatus)
    await drains("drain_through_json_memory_store", " (target >= 1 M)", everyStatus, true, memory, holdsEveryStatus)
    let latest = LatestStatusReducer()
    let holdsTheLast: @Sendable (StatusBoard.Snapshot) -> Bool = {
      $0.statuses == [LatestStatusReducer.key: "v\(count - 1)"]
    }
    await drains("drain_in_process_memory_store_latest_status_only", "", latest, false, memory, holdsTheLast)
    await drains("drain_through_json_memory_store_latest_status_only", "", latest, true, memory, holdsTheLast)
  }

  /// `repeats` drains of one kind, reported: each from a new store, checked by what a restart reads.
  private func drains<Reducer: UpdateReducer>(
    _ metric: String,
    _ target: String,
    _ reducer: Reducer,
    _ throughWire: Bool,
    _ makeStore: @Sendable () -> any UpdateStore,
    _ isComplete: @Sendable (StatusBoard.Snapshot) -> Bool
  ) async
  where Reducer.State == StatusBoard.Snapshot, Reducer.Event == StatusEvent, Reducer.Mutation == StatusBoard.Command {
    let count = quick ? 10_000 : 100_000
    var rates = Samples()
    var withCommand = Samples()
    for _ in 0..<repeats {
      let store = makeStore()
      let seconds = await drainOnce(
        count: count,
        reducer: reducer,
        throughWire: throughWire,
        store: store,
        isComplete: isComplete
      )
      rates.values.append(Double(count) / seconds.drain)
      withCommand.values.append(Double(count) / seconds.withCommand)
      // The last batch was persisted: what a restart reads (record and journal) holds every event.
      guard
        let record = try? PersistedRecord<StatusBoard.Snapshot, StatusBoard.Command>.load(from: store, for: reducer),
        isComplete(record.state), record.finger?.lastEventID == count - 1
      else { fail("C1 \(metric): the store does not hold all \(count) events after the drain") }
    }
    report("C1", metric, rates, "events/s" + target)
    report("C1", metric + "_with_the_command", withCommand, "events/s")
  }

  /// One drain: the machine registers and its first poll waits at a closed gate while one command queues
  /// `count` events; the gate opens, and the clock stops when the machine has applied the last one (its save
  /// is synchronous, so it is stored too).
  /// - Returns: The seconds from the gate opening, and from the command.
  private func drainOnce<Reducer: UpdateReducer>(
    count: Int,
    reducer: Reducer,
    throughWire: Bool,
    store: any UpdateStore,
    isComplete: (StatusBoard.Snapshot) -> Bool
  ) async -> (drain: Double, withCommand: Double)
  where Reducer.State == StatusBoard.Snapshot, Reducer.Event == StatusEvent, Reducer.Mutation == StatusBoard.Command {
    var configuration = EventServerConfiguration()
    configuration.maximumEventsPerQueue = count + 1
    let server = EventServer(application: StatusBoard(users: 1), configuration: configuration, clock: ContinuousClock())
    let transport = GatedTransport(InProcessTransport(server: server, user: "u0", throughWire: throughWire))
    let machine = UpdateMachine(reducer: reducer, transport: transport, store: store)
    await machine.start()
    while !transport.hasWaitingPoll { try? await Task.sleep(for: .milliseconds(1)) }
    let began = ContinuousClock.now
    do {
      try await server.handle(.many(first: 0, count: count, to: "u0"), from: "u0")
    } catch {
      fail("C1: \(error)")
    }
    let queued = ContinuousClock.now
    let snapshots = await machine.snapshots()
    transport.open()
    for await snapshot in snapshots where snapshot.metrics.eventsApplied >= count {
      break
    }
    let ended = ContinuousClock.now
    let applied = await machine.snapshot
    guard applied.metrics.eventsApplied == count, let state = applied.state, isComplete(state) else {
      fail("C1: applied \(applied.metrics.eventsApplied) events, expected \(count)")
    }
    await machine.stop()
    await server.shutdown()
    return ((ended - queued).inSeconds, (ended - began).inSeconds)
  }
}
