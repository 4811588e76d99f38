import EventProtocol
import Synchronization

/// A clock that moves only when a test says so, for driving shells without sleeping on the wall clock.
///
/// Its instants are ``Timestamp``s. Sleepers park until ``advance(by:)`` moves time past their deadline;
/// ``waitForSleepers(count:)`` lets a test wait, without polling, until the code under test has gone to
/// sleep, so "advance, then observe" has no race.
///
/// ```swift
/// let clock = ManualClock()
/// async let woke: Void = clock.sleep(until: clock.now.advanced(by: .seconds(5)), tolerance: nil)
/// await clock.waitForSleepers(count: 1)
/// clock.advance(by: .seconds(5))
/// try await woke
/// ```
public final class ManualClock: Clock, Sendable {
  public typealias Instant = Timestamp
  public typealias Duration = Swift.Duration

  private struct Sleeper {
    var deadline: Timestamp
    var continuation: CheckedContinuation<Void, any Error>
  }

  private struct SleeperWaiter {
    var count: Int
    var continuation: CheckedContinuation<Void, Never>
  }

  private struct State {
    var now: Timestamp
    var nextID = 0
    var sleepers: [Int: Sleeper] = [:]
    var cancelledBeforeSleeping: Set<Int> = []
    var waiters: [SleeperWaiter] = []

    /// Removes and returns the waiters whose count is now reached.
    mutating func takeSatisfiedWaiters() -> [CheckedContinuation<Void, Never>] {
      let satisfied = waiters.filter { $0.count <= sleepers.count }
      waiters.removeAll { $0.count <= sleepers.count }
      return satisfied.map(\.continuation)
    }
  }

  private let state: Mutex<State>

  /// Creates a clock whose time starts at `start`.
  public init(start: Timestamp = Timestamp(secondsSinceEpoch: 1_700_000_000)) {
    self.state = Mutex(State(now: start))
  }

  public var now: Timestamp { state.withLock { $0.now } }

  public var minimumResolution: Duration { .nanoseconds(1) }

  /// How many tasks are sleeping on this clock now.
  public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

  /// The earliest deadline among current sleepers.
  public var nextDeadline: Timestamp? { state.withLock { $0.sleepers.values.map(\.deadline).min() } }

  public func sleep(until deadline: Timestamp, tolerance: Duration? = nil) async throws {
    let id = state.withLock { state in
      defer { state.nextID += 1 }
      return state.nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let (resumeNow, cancelled, waiters) = state.withLock {
          state -> (Bool, Bool, [CheckedContinuation<Void, Never>]) in
          if state.cancelledBeforeSleeping.remove(id) != nil { return (true, true, []) }
          if deadline <= state.now { return (true, false, []) }
          state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
          return (false, false, state.takeSatisfiedWaiters())
        }
        for waiter in waiters { waiter.resume() }
        if resumeNow {
          if cancelled { continuation.resume(throwing: CancellationError()) } else { continuation.resume() }
        }
      }
    } onCancel: {
      let sleeper = state.withLock { state -> Sleeper? in
        if let sleeper = state.sleepers.removeValue(forKey: id) { return sleeper }
        state.cancelledBeforeSleeping.insert(id)
        return nil
      }
      sleeper?.continuation.resume(throwing: CancellationError())
    }
  }

  /// Moves time forward by `duration`, waking every sleeper whose deadline is reached, earliest first.
  public func advance(by duration: Duration) {
    advance(to: now.advanced(by: duration))
  }

  /// Moves time forward to `instant` (never backward), waking every sleeper whose deadline is reached.
  public func advance(to instant: Timestamp) {
    let due = state.withLock { state -> [Sleeper] in
      state.now = max(state.now, instant)
      let due = state.sleepers.filter { $0.value.deadline <= state.now }.sorted { $0.key < $1.key }
      for (id, _) in due { state.sleepers[id] = nil }
      return due.map(\.value).sorted { $0.deadline < $1.deadline }
    }
    for sleeper in due { sleeper.continuation.resume() }
  }

  /// Suspends until at least `count` tasks are sleeping on this clock.
  public func waitForSleepers(count: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let ready = state.withLock { state -> Bool in
        if state.sleepers.count >= count { return true }
        state.waiters.append(SleeperWaiter(count: count, continuation: continuation))
        return false
      }
      if ready { continuation.resume() }
    }
  }
}
