import EventProtocol
import Foundation
import SampleApps
import Testing
import UpdateMachine
import UpdateMachineTesting

@Suite("Test support: the manual clock and the in-memory store", .timeLimit(.minutes(1)))
struct TestSupportTests {
  @Test("sleepers wake only when time reaches their deadline; a passed deadline returns at once")
  func clockWakesAtDeadlines() async throws {
    let clock = ManualClock()
    let start = clock.now
    try await clock.sleep(until: start, tolerance: nil)
    let early = Task { try await clock.sleep(until: start.advanced(by: .seconds(1)), tolerance: nil) }
    let late = Task { try await clock.sleep(until: start.advanced(by: .seconds(5)), tolerance: nil) }
    clock.advance(by: .seconds(2))
    try await early.value
    #expect(clock.now == start.advanced(by: .seconds(2)))
    clock.advance(to: start)
    #expect(clock.now == start.advanced(by: .seconds(2)))
    clock.advance(to: start.advanced(by: .seconds(5)))
    try await late.value
  }

  @Test("a cancelled sleeper throws CancellationError, whether it was asleep or not yet")
  func clockCancellation() async {
    let clock = ManualClock()
    let asleep = Task { try await clock.sleep(until: clock.now.advanced(by: .seconds(60)), tolerance: nil) }
    asleep.cancel()
    await #expect(throws: CancellationError.self) { try await asleep.value }
    let cancelledFirst = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await clock.sleep(until: clock.now.advanced(by: .seconds(60)), tolerance: nil)
    }
    await #expect(throws: CancellationError.self) { try await cancelledFirst.value }
  }

  @Test("the in-memory store saves, loads and keeps what it sets aside")
  func inMemoryStore() throws {
    let store = InMemoryStore(data: Data("old".utf8))
    #expect(try store.setAside(reason: "test") == "memory#1")
    #expect(try store.load() == nil)
    try store.save(Data("new".utf8))
    #expect(try store.load() == Data("new".utf8))
    #expect(store.setAsideData == [Data("old".utf8)])
  }
}
