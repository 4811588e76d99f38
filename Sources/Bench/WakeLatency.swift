import EventProtocol
import EventServer
import Foundation

/// W4: how long a parked long-poll takes to wake, beside the floor under it on this machine.
extension Workloads {
  /// 1,000 long-polls parked on the `EventServer` actor; one event to each in turn; the time from the command
  /// to the poller's task resuming. Rounds alternate with the floor (``ParkingLot``: the same hand-over with
  /// nothing of the server in it) so both see the same moments of a shared machine, and with the floor
  /// holding its actor as long as the round's median command took (what a server doing the same amount of
  /// work, and nothing slower at the 99th percentile, would show on this machine).
  func wakeLatency() async {
    let count = quick ? 200 : 1_000
    var server = (p50: Samples(), p99: Samples())
    var command = (p50: Samples(), p99: Samples())
    var floor = (p50: Samples(), p99: Samples())
    var holding = (p50: Samples(), p99: Samples())
    for _ in 0..<repeats {
      let round = await serverWakes(count: count)
      let woken = percentiles(round.woken)
      server.p50.values.append(woken.p50)
      server.p99.values.append(woken.p99)
      let commands = percentiles(round.commands)
      command.p50.values.append(commands.p50)
      command.p99.values.append(commands.p99)
      let bare = percentiles(await floorWakes(count: count, holding: .zero).woken)
      floor.p50.values.append(bare.p50)
      floor.p99.values.append(bare.p99)
      let held = percentiles(await floorWakes(count: count, holding: .microseconds(commands.p50)).woken)
      holding.p50.values.append(held.p50)
      holding.p99.values.append(held.p99)
    }
    report("W4", "wake_p50", server.p50, "µs")
    report("W4", "wake_p99", server.p99, "µs (target <= 10)")
    report("W4", "command_p50", command.p50, "µs")
    report("W4", "command_p99", command.p99, "µs")
    report("W4", "floor_wake_p50", floor.p50, "µs")
    report("W4", "floor_wake_p99", floor.p99, "µs")
    report("W4", "floor_holding_command_p50_wake_p50", holding.p50, "µs")
    report("W4", "floor_holding_command_p50_wake_p99", holding.p99, "µs")
  }

  /// One round on the server: the microseconds from each command to its poller resuming, and to the
  /// command's own return (the server's work for it, with the hop onto the actor and back).
  private func serverWakes(count: Int) async -> (woken: [Double], commands: [Double]) {
    let server = EventServer(application: StatusBoard(users: count), configuration: .init(), clock: ContinuousClock())
    var queues: [QueueID] = []
    for index in 0..<count { queues.append((try! await server.register(user: UserID("u\(index)"))).queueID) }
    let (resumed, continuation) = AsyncStream.makeStream(of: (Int, ContinuousClock.Instant).self)
    for (index, queue) in queues.enumerated() {
      Task.detached {
        _ = try? await server.events(queueID: queue, user: UserID("u\(index)"), lastEventID: -1)
        continuation.yield((index, ContinuousClock.now))
      }
    }
    await server.waitForParkedPolls(count: count)
    let latencies = await timeWakes(count: count, reportedBy: resumed) { index in
      do {
        try await server.handle(.one(index: index, to: UserID("u\(index)")), from: "u0")
      } catch {
        fail("W4: \(error)")
      }
    }
    await server.shutdown()
    return latencies
  }

  /// One round of the floor: the same hand-over through a minimal actor, which holds itself for `holding`
  /// before each wake.
  private func floorWakes(count: Int, holding: Duration) async -> (woken: [Double], commands: [Double]) {
    let lot = ParkingLot()
    let (resumed, continuation) = AsyncStream.makeStream(of: (Int, ContinuousClock.Instant).self)
    for index in 0..<count {
      Task.detached {
        await lot.park(index)
        continuation.yield((index, ContinuousClock.now))
      }
    }
    await lot.waitUntilParked(count: count)
    return await timeWakes(count: count, reportedBy: resumed) { await lot.wake($0, holding: holding) }
  }

  /// Wakes parked task 0, 1, 2… in turn with `wake`; each reports its index and the time it ran on `resumed`.
  /// - Returns: The microseconds from each `wake` call to its task running, and to the call's return.
  private func timeWakes(
    count: Int,
    reportedBy resumed: AsyncStream<(Int, ContinuousClock.Instant)>,
    wake: (Int) async -> Void
  ) async -> (woken: [Double], commands: [Double]) {
    var latencies: [Double] = []
    var commands: [Double] = []
    var iterator = resumed.makeAsyncIterator()
    for index in 0..<count {
      let pushed = ContinuousClock.now
      await wake(index)
      let returned = ContinuousClock.now
      guard let (woken, at) = await iterator.next(), woken == index else { fail("W4: the wrong task woke") }
      latencies.append((at - pushed).inSeconds * 1_000_000)
      commands.append((returned - pushed).inSeconds * 1_000_000)
    }
    return (latencies, commands)
  }

  private func percentiles(_ latencies: [Double]) -> (p50: Double, p99: Double) {
    let sorted = latencies.sorted()
    return (sorted[sorted.count / 2], sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
  }
}

/// The least an actor-based server's wake costs: an actor holding one continuation per parked task and
/// resuming one when told, with no state machine, queue or event. What W4 measures above this is the
/// server's own work; what this measures is the Swift runtime and the machine (the task resumed on the
/// actor, handed back to the global executor, a pool thread woken).
actor ParkingLot {
  private var parked: [Int: CheckedContinuation<Void, Never>] = [:]
  private var waiter: (count: Int, continuation: CheckedContinuation<Void, Never>)?

  /// Suspends until ``wake(_:)`` names `index`.
  func park(_ index: Int) async {
    await withCheckedContinuation { continuation in
      parked[index] = continuation
      if let waiter, parked.count >= waiter.count {
        self.waiter = nil
        waiter.continuation.resume()
      }
    }
  }

  /// Suspends until at least `count` tasks are parked.
  func waitUntilParked(count: Int) async {
    if parked.count >= count { return }
    await withCheckedContinuation { waiter = (count, $0) }
  }

  /// Resumes the task parked as `index`, after keeping the actor busy for `holding` (a stand-in for a
  /// server's work before its answer; zero for the bare hand-over).
  func wake(_ index: Int, holding: Duration) {
    if holding > .zero {
      let until = ContinuousClock.now + holding
      while ContinuousClock.now < until {}
    }
    parked.removeValue(forKey: index)?.resume()
  }
}
