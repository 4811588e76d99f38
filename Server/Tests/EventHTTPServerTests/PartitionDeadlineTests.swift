import EventProtocol
import EventServer
import Foundation
import PartitionHosting
import PostgresServerLog
import SampleApps
import Synchronization
import TestScheduling
import Testing

/// A stored application's deadlines on a partitioned log run on partition 0's node only, and reach users of
/// every partition once. Were every partition's node to run them, two could read the same due rows at once
/// and deliver the same events twice: here the partitions' nodes count their runs, so a deadline run
/// anywhere but on partition 0 fails the test even when the runs happen not to overlap.
@Suite(
  "Deadlines on partitions",
  .enabled(if: testPostgresURL != nil, "needs PostgreSQL: run Server/scripts/postgres-tests.sh (CI does)"),
  .serialized,
  .hangGuard
)
struct PartitionDeadlineTests {
  typealias Host = PartitionHost<StoredRelay<ScheduledNotes>, ContinuousClock>

  @Test("a deadline set by a command on partition 2 runs once, on partition 0, for users of three partitions")
  func deadlinesRunOnPartitionZero() async throws {
    let database = try await ScratchDatabase.create()
    let map = PartitionMap(count: 4)!
    let log = try await PostgresServerLog.connect(
      url: database.url,
      logger: quietLogger,
      operationTimeout: testTimeout(.seconds(5)),
      partitions: map
    )
    let runs = DeadlineRuns()
    let host = try await Host.open(log: log, rotation: 0) { partition in
      try await EventServer.joining(
        ScheduledNotes(counted: (runs, partition.partitionIndex)),
        on: partition,
        clock: ContinuousClock()
      ).0
    }
    #expect(try await host.rebalance().taken == [0, 1, 2, 3])
    // One user on each of partitions 1, 2 and 3; the command comes from partition 2's.
    let users = (1...3).map { wanted in
      (0...).lazy.map { UserID("user\($0)") }.first { map.partition(of: $0) == wanted }!
    }
    var queues: [(node: Host.Node, queue: Registration<NoteSnapshot?>, last: Int)] = []
    for user in users {
      let node = try #require(await host.node(for: user))
      let queue = try await node.register(user: user)
      queues.append((node, queue, queue.lastEventID))
    }
    // Due in the next whole second: each note waits in its table until then, on partition 2's command.
    let due = Timestamp.wallClockNow().sinceEpoch.components.seconds + 1
    for user in users {
      let note = ScheduledNotes.Command(text: "reminder", recipient: user, at: due)
      try await queues[1].node.handle(.request(note), from: users[1])
    }

    // Were a reminder never to come, the test would wait for its time limit saying nothing; after two
    // minutes it records what each partition's node is waiting for (it hung twice under ThreadSanitizer).
    let watchdog = Task {
      try await Task.sleep(for: .seconds(120))
      var lines: [String] = []
      for partition in 0..<map.count {
        let user = (0...).lazy.map { UserID("user\($0)") }.first { map.partition(of: $0) == partition }!
        let state = await host.node(for: user)?.waitDiagnostics ?? "no node"
        lines.append("partition \(partition): \(state)")
      }
      Issue.record("no reminder after two minutes:\n\(lines.joined(separator: "\n"))")
    }
    defer { watchdog.cancel() }
    for index in users.indices {
      var reminders = 0
      while reminders == 0 {
        let events = try await queues[index].node.events(
          queueID: queues[index].queue.queueID,
          user: users[index],
          lastEventID: queues[index].last
        )
        queues[index].last = events.last?.id ?? queues[index].last
        reminders += events.filter { $0.body == .payload(.note(text: "reminder")) }.count
      }
      #expect(reminders == 1, "\(users[index])")
      // Nothing more: a dont_block poll after it holds no second reminder.
      let more = try await queues[index].node.events(
        queueID: queues[index].queue.queueID,
        user: users[index],
        lastEventID: queues[index].last,
        dontBlock: true
      )
      #expect(!more.contains { $0.body == .payload(.note(text: "reminder")) })
    }
    #expect(runs.partitions == [0], "the application's deadlines ran on partitions \(runs.partitions)")
    await host.shutdown()
    await log.close()
    try await database.drop()
  }
}

/// Which partitions' nodes ran the application's deadlines.
final class DeadlineRuns: Sendable {
  private let ran = Mutex<Set<Int>>([])

  var partitions: Set<Int> { ran.withLock { $0 } }

  func ran(on partition: Int) { ran.withLock { _ = $0.insert(partition) } }
}
