import EventProtocol
import EventServer
import Foundation

/// W3: one queue of 100,000 events drained in one poll, in process and through JSON, then in bounded polls.
extension Workloads {
  /// The whole backlog in one poll, then in polls of at most 1,000 events.
  ///
  /// The first rounds warm the process up and are printed apart (`…_warm_up`, with the page faults they
  /// took), not counted in the medians: the warm-up ends with the first round that takes no page fault, or
  /// after ten rounds. Whether a round faults is the allocator's doing, not the coder's: glibc serves a block
  /// this large from fresh pages (a fault per 4 KiB touched) unless its dynamic thresholds have risen past
  /// it, which depends on what the process freed before. On this machine, with glibc's defaults, every
  /// round here faults (about 6,800 times, the encode 17–18 ms instead of 9); with the thresholds fixed
  /// (`GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=134217728`, as
  /// docs/deploying.md's systemd unit sets them) the first two rounds fault and none after.
  func catchUp() {
    let count = quick ? 10_000 : 100_000
    var (server, queue) = backlog(of: count, seed: 3, workload: "W3")
    var warmUp = (rounds: Samples(), faults: 0)
    var round: UInt64 = 0
    while warmUp.rounds.values.count < 10 {
      let cold = onePollRound(&server, queue: queue, count: count, as: PollID(round))
      round += 1
      guard cold.pageFaults > 0 else { break }
      warmUp.rounds.values.append(cold.throughJSON)
      warmUp.faults += cold.pageFaults
    }
    var inProcess = Samples()
    var throughJSON = Samples()
    var encodeJSON = Samples()
    var decodeJSON = Samples()
    for _ in 0..<repeats {
      let measured = onePollRound(&server, queue: queue, count: count, as: PollID(round))
      round += 1
      inProcess.values.append(measured.inProcess)
      throughJSON.values.append(measured.throughJSON)
      encodeJSON.values.append(measured.encode)
      decodeJSON.values.append(measured.throughJSON - measured.encode)
    }
    report("W3", "one_poll_in_process", inProcess, "ms")
    report("W3", "one_poll_through_json", throughJSON, "ms (target <= 50)")
    report("W3", "one_poll_json_encode", encodeJSON, "ms")
    report("W3", "one_poll_json_decode", decodeJSON, "ms")
    report(
      "W3",
      "one_poll_through_json_warm_up",
      warmUp.rounds,
      "ms (\(warmUp.rounds.values.count) rounds, \(warmUp.faults) page faults; not counted above)"
    )
    boundedPolls(&server, queue: queue, count: count)
  }

  /// One poll of the whole backlog, and its answer encoded and decoded, each checked.
  /// - Returns: Milliseconds in process, through JSON and for the encode alone, and the minor page faults
  ///   the process took meanwhile.
  private func onePollRound(
    _ server: inout EventServerStateMachine<StatusBoard>,
    queue: QueueID,
    count: Int,
    as pollID: PollID
  ) -> (inProcess: Double, throughJSON: Double, encode: Double, pageFaults: Int) {
    let faultsBefore = minorPageFaults()
    var batch: [EventEnvelope<StatusEvent>] = []
    let inProcess = seconds {
      let actions = server.poll(pollID, queueID: queue, user: "u0", lastEventID: -1, dontBlock: true, now: start)
      if case .completePoll(_, .events(let events))? = actions.last { batch = events }
    }
    guard batch.count == count else { fail("W3: \(batch.count) events, expected \(count)") }
    // Each round encodes the server's own envelopes (as its answer does), not the ones the last round
    // decoded: those are a client's, which a server never writes.
    var encoded = 0.0
    var decoded: [EventEnvelope<StatusEvent>] = []
    let throughJSON = seconds {
      do {
        let began = ContinuousClock.now
        let body = try WireFormat.encode(EventsReply(events: batch, queueID: queue))
        encoded = (ContinuousClock.now - began).inSeconds
        decoded = try WireFormat.decode(EventsReply<StatusEvent>.self, from: body).events
      } catch {
        fail("W3: \(error)")
      }
    }
    guard decoded == batch else { fail("W3: JSON gave \(decoded.count) events, not the server's") }
    return (inProcess * 1000, throughJSON * 1000, encoded * 1000, minorPageFaults() - faultsBefore)
  }

  /// Polls of at most 1,000 events, each acknowledging the previous batch, until drained.
  private func boundedPolls(_ server: inout EventServerStateMachine<StatusBoard>, queue: QueueID, count: Int) {
    var boundedInProcess = Samples()
    var boundedJSON = Samples()
    var lastEventID = -1
    var pollID: UInt64 = 1_000
    var received = 0
    while received < count {
      pollID += 1
      var batch: [EventEnvelope<StatusEvent>] = []
      boundedInProcess.values.append(
        seconds { batch = pollBacklog(&server, queue: queue, after: lastEventID, as: pollID) ?? [] } * 1000
      )
      boundedJSON.values.append(
        seconds {
          if let body = try? WireFormat.encode(EventsReply(events: batch, queueID: queue)) {
            batch = (try? WireFormat.decode(EventsReply<StatusEvent>.self, from: body).events) ?? []
          }
        } * 1000
      )
      guard let last = batch.last, batch.count <= 1_000, last.id > lastEventID else {
        fail("W3: a bounded poll gave \(batch.count)")
      }
      received += batch.count
      lastEventID = last.id
    }
    guard received == count else { fail("W3: bounded polls gave \(received) events, expected \(count)") }
    report("W3", "bounded_poll_in_process", boundedInProcess, "ms")
    report("W3", "bounded_poll_through_json", boundedJSON, "ms")
  }

  /// The minor page faults the process has taken (pages the kernel mapped on their first touch).
  private func minorPageFaults() -> Int {
    var usage = rusage()
    #if os(Linux)
      getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
      getrusage(RUSAGE_SELF, &usage)
    #endif
    return usage.ru_minflt
  }
}
