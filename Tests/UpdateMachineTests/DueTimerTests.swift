import EventProtocol
import EventServer
import Foundation
import SampleApps
import Synchronization
import TestScheduling
import Testing
import UpdateMachine
import UpdateMachineTesting

/// A clock whose time the test sets and whose sleepers never wake: the machine's timer task has not run
/// yet when the next input arrives (on a busy device, a scheduling delay).
private final class StalledTimerClock: Clock, Sendable {
  typealias Instant = Timestamp
  private let current: Mutex<Timestamp>
  private let parked = Mutex<[AsyncStream<Never>.Continuation]>([])

  init(_ start: Timestamp) {
    current = Mutex(start)
  }

  var now: Timestamp { current.withLock { $0 } }
  var minimumResolution: Duration { .nanoseconds(1) }

  func set(_ time: Timestamp) {
    current.withLock { $0 = time }
  }

  func sleep(until deadline: Timestamp, tolerance: Duration?) async throws {
    let (stream, continuation) = AsyncStream.makeStream(of: Never.self)
    parked.withLock { $0.append(continuation) }
    for await _ in stream {}
    throw CancellationError()
  }
}

@Suite("A due timer is never dropped by an input that arrives first", .hangGuard)
struct DueTimerTests {
  @Test("an input after a request's deadline, before the timer task ran, times the request out first")
  func dueTimerRunsBeforeInput() async throws {
    let start = Timestamp(secondsSinceEpoch: 1_700_000_000)
    let clock = StalledTimerClock(start)
    let server = EventServer(application: NoteBoard(), clock: clock, anchor: start)
    let transport = FaultInjectingTransport(
      InProcessTransport(server: server, user: "alice"),
      plan: FaultPlan(seed: 1),
      clock: clock
    )
    transport.scriptNext(.neverAnswer)
    let machine = UpdateMachine(
      reducer: NotesReducer(user: "alice"),
      transport: transport,
      store: InMemoryStore(),
      clock: clock,
      anchor: start
    )
    await machine.start()
    #expect(await machine.snapshot.metrics.failures == 0)
    // The register's deadline passes; its timer task never runs. The next input must still time it out.
    clock.set(start.advanced(by: UpdateMachineConfiguration().registerTimeout + .seconds(1)))
    _ = await machine.submit(.post("hello", to: ["bob"]))
    let after = await machine.snapshot
    #expect(after.metrics.failures == 1)
    #expect(after.phase != .registering || after.metrics.registers == 2)
    await machine.stop()
  }
}
