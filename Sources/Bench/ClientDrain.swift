import EventProtocol
import EventServer
import Foundation
import UpdateMachine

extension Workloads {
  /// C1: an `UpdateMachine` whose queue receives 100,000 video-status events at once drains them in polls of
  /// `pollBatchLimit`, applying and persisting each batch: in process with the in-memory and the file store,
  /// and through the JSON wire format with the in-memory store.
  func clientDrain() async {
    let count = quick ? 10_000 : 100_000
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("bench-drain-\(UUID()).json")
    defer { try? FileManager.default.removeItem(at: url) }
    let variants: [(metric: String, throughWire: Bool, store: @Sendable () -> any UpdateStore)] = [
      ("drain_in_process_memory_store", false, { InMemoryStore() }),
      (
        "drain_in_process_file_store", false,
        {
          try? FileManager.default.removeItem(at: url)
          return FileStore(url: url)
        }
      ),
      ("drain_through_json_memory_store", true, { InMemoryStore() }),
    ]
    for variant in variants {
      var rates = Samples()
      for _ in 0..<repeats {
        let store = variant.store()
        let seconds = await drainOnce(count: count, throughWire: variant.throughWire, store: store)
        rates.values.append(Double(count) / seconds)
        // The last batch was persisted: what a restart reads (record and journal) holds every status.
        guard
          let record = try? PersistedRecord<StatusBoard.Snapshot, StatusBoard.Command>.load(
            from: store,
            for: StatusReducer()
          ),
          record.state.statuses.count == count, record.finger?.lastEventID == count - 1
        else { fail("C1: the store does not hold all \(count) statuses after the drain") }
      }
      report("C1", variant.metric, rates, "events/s")
    }
  }

  /// One drain: the machine registers and parks its long-poll, one command queues `count` events, and the
  /// clock stops when the machine has applied the last one (its save is synchronous, so it is stored too).
  private func drainOnce(count: Int, throughWire: Bool, store: any UpdateStore) async -> Double {
    var configuration = EventServerConfiguration()
    configuration.maximumEventsPerQueue = count + 1
    let server = EventServer(application: StatusBoard(users: 1), configuration: configuration, clock: ContinuousClock())
    let machine = UpdateMachine(
      reducer: StatusReducer(),
      transport: InProcessTransport(server: server, user: "u0", throughWire: throughWire),
      store: store
    )
    await machine.start()
    await server.waitForParkedPolls(count: 1)
    let began = ContinuousClock.now
    do {
      try await server.handle(.many(first: 0, count: count, to: "u0"), from: "u0")
    } catch {
      fail("C1: \(error)")
    }
    for await snapshot in await machine.snapshots() where snapshot.metrics.eventsApplied >= count {
      break
    }
    let elapsed = (ContinuousClock.now - began).inSeconds
    let applied = await machine.snapshot
    guard applied.metrics.eventsApplied == count, applied.state?.statuses.count == count else {
      fail("C1: applied \(applied.metrics.eventsApplied) events, expected \(count)")
    }
    await machine.stop()
    await server.shutdown()
    return elapsed
  }
}
