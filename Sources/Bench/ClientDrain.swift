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
  func clientDrain() async {
    let count = quick ? 10_000 : 100_000
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("bench-drain-\(UUID()).json")
    defer { try? FileManager.default.removeItem(at: url) }
    let variants: [(metric: String, target: String, throughWire: Bool, store: @Sendable () -> any UpdateStore)] = [
      ("drain_in_process_memory_store", " (target >= 5 M)", false, { InMemoryStore() }),
      (
        "drain_in_process_file_store", "", false,
        {
          try? FileManager.default.removeItem(at: url)
          return FileStore(url: url)
        }
      ),
      ("drain_through_json_memory_store", " (target >= 1 M)", true, { InMemoryStore() }),
    ]
    for variant in variants {
      var rates = Samples()
      var withCommand = Samples()
      for _ in 0..<repeats {
        let store = variant.store()
        let seconds = await drainOnce(count: count, throughWire: variant.throughWire, store: store)
        rates.values.append(Double(count) / seconds.drain)
        withCommand.values.append(Double(count) / seconds.withCommand)
        // The last batch was persisted: what a restart reads (record and journal) holds every status.
        guard
          let record = try? PersistedRecord<StatusBoard.Snapshot, StatusBoard.Command>.load(
            from: store,
            for: StatusReducer()
          ),
          record.state.statuses.count == count, record.finger?.lastEventID == count - 1
        else { fail("C1: the store does not hold all \(count) statuses after the drain") }
      }
      report("C1", variant.metric, rates, "events/s" + variant.target)
      report("C1", variant.metric + "_with_the_command", withCommand, "events/s")
    }
  }

  /// One drain: the machine registers and its first poll waits at a closed gate while one command queues
  /// `count` events; the gate opens, and the clock stops when the machine has applied the last one (its save
  /// is synchronous, so it is stored too).
  /// - Returns: The seconds from the gate opening, and from the command.
  private func drainOnce(
    count: Int,
    throughWire: Bool,
    store: any UpdateStore
  ) async -> (drain: Double, withCommand: Double) {
    var configuration = EventServerConfiguration()
    configuration.maximumEventsPerQueue = count + 1
    let server = EventServer(application: StatusBoard(users: 1), configuration: configuration, clock: ContinuousClock())
    let transport = GatedTransport(InProcessTransport(server: server, user: "u0", throughWire: throughWire))
    let machine = UpdateMachine(reducer: StatusReducer(), transport: transport, store: store)
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
    guard applied.metrics.eventsApplied == count, applied.state?.statuses.count == count else {
      fail("C1: applied \(applied.metrics.eventsApplied) events, expected \(count)")
    }
    await machine.stop()
    await server.shutdown()
    return ((ended - queued).inSeconds, (ended - began).inSeconds)
  }
}
