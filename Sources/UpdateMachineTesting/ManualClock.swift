import EventProtocol
import Synchronization

/// A clock that moves only when a test says so, for driving shells without sleeping on the wall clock.
///
/// Its instants are `Timestamp`s. Sleepers park until ``advance(by:)`` moves time past their deadline; a
/// sleep whose deadline has already passed returns at once, so "advance, then observe" has no race even
/// when the sleeper has not started yet. ``waitForSleepers(count:)`` suspends until the code under test has
/// parked that many sleepers (its timers are set), so a test can advance time knowing who will wake.
///
/// ```swift
/// let clock = ManualClock()
/// let deadline = clock.now.advanced(by: .seconds(5))
/// async let woke: Void = clock.sleep(until: deadline, tolerance: nil)
/// await clock.waitForSleepers(count: 1)
/// clock.advance(to: deadline)
/// try await woke
/// ```
public final class ManualClock: Clock, Sendable {
  /// The clock's instants: the engine's and the server's timestamps.
  public typealias Instant = Timestamp
  /// The clock's durations.
  public typealias Duration = Swift.Duration

  private struct Sleeper {
    var deadline: Timestamp
    var continuation: CheckedContinuation<Void, any Error>
  }

  private struct State {
    var now: Timestamp
    var nextID = 0
    var sleepers: [Int: Sleeper] = [:]
    var cancelledBeforeSleeping: Set<Int> = []
    var sleeperWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    /// Removes and returns the waiters satisfied by the current number of sleepers.
    mutating func readyWaiters() -> [CheckedContinuation<Void, Never>] {
      let ready = sleeperWaiters.filter { $0.count <= sleepers.count }.map(\.continuation)
      sleeperWaiters.removeAll { $0.count <= sleepers.count }
      return ready
    }
  }

  private let state: Mutex<State>

  /// Creates a clock whose time starts at `start`.
  public init(start: Timestamp = Timestamp(secondsSinceEpoch: 1_700_000_000)) {
    self.state = Mutex(State(now: start))
  }

  /// The time the test has moved the clock to.
  public var now: Timestamp { state.withLock { $0.now } }

  /// One nanosecond: the clock moves only when told, to any instant.
  public var minimumResolution: Duration { .nanoseconds(1) }

  /// How many sleepers are parked now.
  public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

  /// The earliest deadline of a parked sleeper, if any.
  public var nextDeadline: Timestamp? { state.withLock { $0.sleepers.values.map(\.deadline).min() } }

  /// Suspends until the test moves the clock to `deadline` or past it, or the task is cancelled.
  /// - Throws: `CancellationError` when the task is cancelled first.
  public func sleep(until deadline: Timestamp, tolerance: Duration? = nil) async throws {
    let id = state.withLock { state in
      defer { state.nextID += 1 }
      return state.nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        enum Start { case sleep, wake, cancelled }
        let (start, ready) = state.withLock { state -> (Start, [CheckedContinuation<Void, Never>]) in
          if state.cancelledBeforeSleeping.remove(id) != nil { return (.cancelled, []) }
          if deadline <= state.now { return (.wake, []) }
          state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
          return (.sleep, state.readyWaiters())
        }
        for waiter in ready { waiter.resume() }
        switch start {
        case .sleep: break
        case .wake: continuation.resume()
        case .cancelled: continuation.resume(throwing: CancellationError())
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

  /// Suspends until at least `count` sleepers are parked.
  public func waitForSleepers(count: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let parked = state.withLock { state -> Bool in
        if state.sleepers.count >= count { return true }
        state.sleeperWaiters.append((count, continuation))
        return false
      }
      if parked { continuation.resume() }
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
}
