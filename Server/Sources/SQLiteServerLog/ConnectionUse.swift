import Synchronization

/// Who is using the SQLite log's one connection: the statements running on it, and whether it is closed.
///
/// SQLiteNIO runs each call on a thread of its pool, so a `close` issued while a statement runs on another
/// thread would free the connection under it (ThreadSanitizer saw `sqlite3_close` racing a
/// `sqlite3_prepare_v3`). A statement therefore enters before it runs and leaves after; ``close()`` refuses
/// statements from then on and waits for those under way before the connection is closed.
final class ConnectionUse: Sendable {
  private struct State {
    var isClosed = false
    var running = 0
    var closeWaiters: [CheckedContinuation<Void, Never>] = []
  }

  private let state = Mutex(State())

  /// Counts a statement in. Returns `false` once ``close()`` has begun: the statement must not run.
  func enter() -> Bool {
    state.withLock { state in
      guard !state.isClosed else { return false }
      state.running += 1
      return true
    }
  }

  /// Counts a statement out, waking a close waiting for the last one.
  func leave() {
    let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
      state.running -= 1
      guard state.isClosed, state.running == 0 else { return [] }
      defer { state.closeWaiters = [] }
      return state.closeWaiters
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Refuses statements from now on and returns once none runs. Returns `false` when an earlier call had
  /// already closed it (the caller must not close the connection twice).
  func close() async -> Bool {
    let first = state.withLock { state in
      defer { state.isClosed = true }
      return !state.isClosed
    }
    guard first else { return false }
    await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
      let idle = state.withLock { state in
        if state.running == 0 { return true }
        state.closeWaiters.append(waiter)
        return false
      }
      if idle { waiter.resume() }
    }
    return true
  }

  /// The number of statements under way (for tests).
  var runningCount: Int { state.withLock { $0.running } }
}
