import EventProtocol
import EventServer
import Foundation
import UpdateMachine
import VideoMessaging

/// The workloads of the performance issue, on today's code, each checking its own result.
struct Workloads {
  let quick: Bool
  let repeats: Int
  /// What the run printed, for `--check`.
  let figures: FigureLog

  var start: Timestamp { Timestamp(secondsSinceEpoch: 1_700_000_000) }

  func report(_ workload: String, _ metric: String, _ samples: Samples, _ unit: String) {
    figures.record(workload, metric, samples.median, samples.range.isEmpty ? unit : "\(unit) \(samples.range)")
  }

  func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("Bench: \(message)\n".utf8))
    exit(1)
  }

  func seconds(_ body: () -> Void) -> Double {
    let began = ContinuousClock.now
    body()
    return (ContinuousClock.now - began).inSeconds
  }

  // MARK: - W1

  /// 1,000 queues; events fanned out to 10 queues each; every 1,000 events every queue is drained. Then
  /// the scale-out issue's shape: 1,000 events each to all 1,000 queues.
  func fanOut() {
    let tenEach = deliveryRates(events: quick ? 10_000 : 100_000, recipientsEach: 10) {
      .fanOut(index: $0, users: 1_000, fanOut: 10)
    }
    report("W1", "deliveries_per_second", tenEach, "1/s")
    let keptList = deliveryRates(events: 1_000, recipientsEach: 1_000) { .everyone(index: $0, keptList: true) }
    report("W1", "broadcast_deliveries_per_second", keptList, "1/s (target >= 25 M)")
    let builtList = deliveryRates(events: 1_000, recipientsEach: 1_000) { .everyone(index: $0, keptList: false) }
    report("W1", "broadcast_fresh_list_deliveries_per_second", builtList, "1/s")
    figures.record("W1", "peak_memory", Double(Memory.peak() / 1_000_000), "MB", format: "%.0f")
  }

  /// Deliveries per second of `events` commands made by `command`, each to `recipientsEach` of 1,000 queues
  /// (one per user), every queue drained every 1,000 events and at the end; checks that the queues received
  /// every delivery once, in increasing ids, and end empty.
  private func deliveryRates(
    events: Int,
    recipientsEach: Int,
    command: (Int) -> StatusBoard.Command
  ) -> Samples {
    let users = 1_000
    let expected = events * recipientsEach
    var rates = Samples()
    for _ in 0..<repeats {
      var configuration = EventServerConfiguration()
      configuration.maximumQueuesPerUser = 1
      var server = EventServerStateMachine(
        application: StatusBoard(users: users),
        configuration: configuration,
        random: SeededRandomNumberGenerator(seed: 1),
        now: start
      )
      let queues = (0..<users).map {
        server.register(user: UserID("u\($0)"), eventTypes: nil, lifespan: nil, now: start).0.queueID
      }
      var lastSeen = [Int](repeating: -1, count: users)
      var delivered = 0
      var pollID: UInt64 = 0
      func drain(_ server: inout EventServerStateMachine<StatusBoard>) {
        for (index, queue) in queues.enumerated() {
          pollID += 1
          let actions = server.poll(
            PollID(pollID),
            queueID: queue,
            user: UserID("u\(index)"),
            lastEventID: lastSeen[index],
            dontBlock: true,
            now: start
          )
          guard case .completePoll(_, .events(let batch))? = actions.last else { fail("W1: a poll was not answered") }
          // Reads each envelope's id in place, as a transport encoding the answer reads its fields: a
          // `for event in batch` loop would copy every envelope (a reference count each way) on top.
          for position in batch.indices where batch[position].id > lastSeen[index] {
            lastSeen[index] = batch[position].id
            delivered += 1
          }
        }
      }
      let elapsed = seconds {
        for index in 0..<events {
          do {
            _ = try server.handle(command(index), from: "u0", now: start)
          } catch {
            fail("W1: \(error)")
          }
          if (index + 1) % 1_000 == 0 { drain(&server) }
        }
        drain(&server)
      }
      guard delivered == expected else { fail("W1: \(delivered) deliveries, expected \(expected)") }
      guard queues.allSatisfy({ server.queue($0)?.eventCount == 0 }) else { fail("W1: a queue is not empty") }
      rates.values.append(Double(delivered) / elapsed)
    }
    return rates
  }

  // MARK: - W2

  /// 100,000 idle queues: bytes per queue, registrations per second, sweeps.
  func idleQueues() {
    let count = quick ? 10_000 : 100_000
    var server = EventServerStateMachine(
      application: StatusBoard(users: 1),
      random: SeededRandomNumberGenerator(seed: 2),
      now: start
    )
    let users = (0..<count).map { UserID("idle\($0)") }
    let before = Memory.resident()
    let elapsed = seconds {
      for user in users { _ = server.register(user: user, eventTypes: nil, lifespan: nil, now: start) }
    }
    let after = Memory.resident()
    guard server.queueCount == count else { fail("W2: \(server.queueCount) queues") }
    figures.record("W2", "bytes_per_idle_queue", Double((after - before) / count), "B", format: "%.0f")
    figures.record("W2", "registrations_per_second", Double(count) / elapsed, "1/s")
    let sweepNone = seconds { _ = server.timerFired(now: start.advanced(by: .seconds(60))) }
    guard server.queueCount == count else { fail("W2: a sweep removed live queues") }
    figures.record("W2", "sweep_none_expired", sweepNone * 1000, "ms")
    let sweepAll = seconds { _ = server.timerFired(now: start.advanced(by: .seconds(3_600))) }
    guard server.queueCount == 0 else { fail("W2: expired queues survived the sweep") }
    figures.record("W2", "sweep_all_expired", sweepAll * 1000, "ms")
  }

  // MARK: - W3

  /// A server core whose one queue (user `u0`'s) holds `count` events.
  /// One `dontBlock` poll of up to 1,000 events of the backlog queue after `lastEventID`; `nil` when the
  /// server did not answer with events.
  func pollBacklog(
    _ server: inout EventServerStateMachine<StatusBoard>,
    queue: QueueID,
    after lastEventID: Int,
    as pollID: UInt64
  ) -> [EventEnvelope<StatusEvent>]? {
    let actions = server.poll(
      PollID(pollID),
      queueID: queue,
      user: "u0",
      lastEventID: lastEventID,
      dontBlock: true,
      limit: 1_000,
      now: start
    )
    guard case .completePoll(_, .events(let events))? = actions.last else { return nil }
    return events
  }

  func backlog(of count: Int, seed: UInt64, workload: String) -> (EventServerStateMachine<StatusBoard>, QueueID) {
    var configuration = EventServerConfiguration()
    configuration.maximumEventsPerQueue = count + 1
    var server = EventServerStateMachine(
      application: StatusBoard(users: 1),
      configuration: configuration,
      random: SeededRandomNumberGenerator(seed: seed),
      now: start
    )
    let queue = server.register(user: "u0", eventTypes: nil, lifespan: nil, now: start).0.queueID
    for index in 0..<count {
      do {
        _ = try server.handle(.one(index: index, to: "u0"), from: "u0", now: start)
      } catch {
        fail("\(workload): \(error)")
      }
    }
    return (server, queue)
  }

  // MARK: - C1

  /// The save after a one-event batch when the state holds 10,000 videos: the journal entry a machine appends
  /// now, beside the whole record it used to write (and still writes at each compaction).
  func clientSave() {
    let videos = (0..<10_000).map { index in
      OutgoingVideo(id: VideoID(rawValue: "video-\(index)"), recipient: "bob", status: .uploaded)
    }
    let record = benchRecord(of: VideoSnapshot(outgoing: videos), commands: VideoCommand.self, lastEventID: 41)
    let event = VideoEvent.status(VideoStatusChanged(video: VideoID(rawValue: "video-7"), status: .viewed))
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID())")
    defer { try? FileManager.default.removeItem(at: folder) }
    let store = FileStore(url: folder.appendingPathComponent("record.json"))
    var whole = Samples()
    var wholeFile = Samples()
    var entry = Samples()
    var entryFile = Samples()
    var fsyncOnly = Samples()
    var statuses = Samples()
    let drained = drainedRecord(count: quick ? 10_000 : 100_000)
    for _ in 0..<repeats {
      statuses.values.append(seconds { _ = try? drained.encoded() } * 1000)
      whole.values.append(seconds { _ = try? InMemoryStore().save(record.encoded()) } * 1000)
      wholeFile.values.append(seconds { _ = try? store.save(record.encoded()) } * 1000)
      let memory = InMemoryStore()
      try? memory.save(Data())
      entry.values.append(
        seconds { _ = try? memory.appendToJournal(record.journalEntry(appending: [event])) } * 1000
      )
      entryFile.values.append(
        seconds { _ = try? store.appendToJournal(record.journalEntry(appending: [event])) } * 1000
      )
      fsyncOnly.values.append(seconds { _ = try? store.appendToJournal(Data()) } * 1000)
    }
    guard let saved = try? store.load(), let entries = try? store.loadJournal(after: saved),
      entries.count == 2, entries[1].isEmpty
    else { fail("C1: the journal does not hold the entries appended after the last whole save") }
    report("C1", "save_whole_record_10000_videos_in_memory", whole, "ms")
    report("C1", "save_whole_record_10000_videos_file", wholeFile, "ms")
    report("C1", "save_one_event_batch_10000_videos_in_memory", entry, "ms")
    report("C1", "save_one_event_batch_10000_videos_file_with_fsync", entryFile, "ms")
    report("C1", "fsync_of_an_empty_append", fsyncOnly, "ms")
    report("C1", "encode_whole_record_\(drained.state.statuses.count)_statuses", statuses, "ms")
  }

  /// The record a drain of `count` statuses leaves (C1's state): what each compaction encodes.
  private func drainedRecord(count: Int) -> PersistedRecord<StatusBoard.Snapshot, StatusBoard.Command> {
    var state = StatusBoard.Snapshot()
    for index in 0..<count { state.statuses["v\(index)"] = "viewed" }
    return benchRecord(of: state, commands: StatusBoard.Command.self, lastEventID: count - 1)
  }

  /// A client's record holding `state`, with an empty outbox, as C1's saves write it.
  private func benchRecord<State: Codable & Sendable & Equatable, Command: Codable & Sendable & Equatable>(
    of state: State,
    commands: Command.Type,
    lastEventID: Int
  ) -> PersistedRecord<State, Command> {
    PersistedRecord(
      clientID: "bench",
      state: state,
      finger: EventFinger(queueID: "q", lastEventID: lastEventID),
      lastContactAt: start,
      dataAsOf: start,
      queueLifetime: .seconds(3600),
      longPollTimeout: .seconds(90),
      outbox: [],
      rejected: [],
      nextMutationID: MutationID(1)
    )
  }
}
