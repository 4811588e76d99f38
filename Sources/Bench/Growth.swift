import EventProtocol
import EventServer
import Foundation

extension Workloads {
  // MARK: - G1

  /// How the server's costs grow with size: each measured at three sizes ten times apart (the median of
  /// `repeats` rounds), so a cost that grows faster than its work shows as a ratio above 10 between one size
  /// and the next (a quadratic one as about 100).
  ///
  /// - Draining one backlog of *n* events in polls of 1,000, each acknowledging the batch before (in
  ///   process): linear if acknowledging costs only what it drops.
  /// - One poll answering all *n* events at once (in process).
  /// - A sweep that finds all *n* idle queues expired.
  func growth() {
    let sizes = quick ? [1_000, 10_000] : [10_000, 100_000, 1_000_000]
    var previous: (drain: Double, sweep: Double)?
    for size in sizes {
      // The median of `repeats` rounds: the smallest size takes about a millisecond, and one round's
      // ratio to the next size is at the mercy of whatever else the machine did in that millisecond.
      let drain = Samples(values: (0..<repeats).map { _ in drainBacklog(of: size) }).median
      let sweep = Samples(values: (0..<repeats).map { _ in sweepExpired(queues: size) }).median
      figures.record("G1", "drain_in_polls_of_1000_\(size)", drain * 1000, "ms")
      figures.record("G1", "sweep_all_expired_\(size)", sweep * 1000, "ms")
      if let previous {
        figures.record("G1", "drain_growth_per_10x_to_\(size)", drain / previous.drain, "x", format: "%.3g")
        figures.record("G1", "sweep_growth_per_10x_to_\(size)", sweep / previous.sweep, "x", format: "%.3g")
      }
      previous = (drain, sweep)
    }
  }

  /// Seconds to drain a queue of `count` events in polls of 1,000, checking every event arrives once, in order.
  private func drainBacklog(of count: Int) -> Double {
    var (server, queue) = backlog(of: count, seed: 5, workload: "G1")
    var lastEventID = -1
    var received = 0
    var pollID: UInt64 = 0
    let elapsed = seconds {
      while received < count {
        pollID += 1
        guard let batch = pollBacklog(&server, queue: queue, after: lastEventID, as: pollID), let last = batch.last,
          batch.first?.id == lastEventID + 1, last.id == lastEventID + batch.count
        else { fail("G1: a poll of the backlog of \(count) gave the wrong events after \(lastEventID)") }
        received += batch.count
        lastEventID = last.id
      }
    }
    guard received == count else { fail("G1: drained \(received) of \(count)") }
    return elapsed
  }

  /// Seconds for the sweep that finds `count` idle queues expired, checking it removes them all.
  private func sweepExpired(queues count: Int) -> Double {
    var server = EventServerStateMachine(
      application: StatusBoard(users: 1),
      random: SeededRandomNumberGenerator(seed: 6),
      now: start
    )
    for index in 0..<count {
      _ = server.register(user: UserID("idle\(index)"), eventTypes: nil, lifespan: nil, now: start)
    }
    guard server.queueCount == count else { fail("G1: \(server.queueCount) of \(count) queues registered") }
    let elapsed = seconds { _ = server.timerFired(now: start.advanced(by: .seconds(3_600))) }
    guard server.queueCount == 0 else { fail("G1: \(server.queueCount) expired queues survived the sweep") }
    return elapsed
  }
}
