import EventServer
import Synchronization

/// The `event_log` notifications as hints for a node that follows the log: ``wait(after:)`` returns once
/// an append past a position was announced, or when the listening connection starts again (what was sent
/// while nobody listened is lost, so every waiter reads the log then).
final class AppendHints: Sendable {
  private struct State {
    var latest: UInt64 = 0
    var waiters: [(id: Int, after: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
    var nextID = 0
    var listener: Task<Void, Never>?
    var stopped = false
  }

  private let state = Mutex(State())

  /// The newest position a notification announced (0 before the first).
  var latest: UInt64 { state.withLock { $0.latest } }

  /// Starts the listening task on the first call: it runs `listen` (which reports each announced
  /// position), and when that ends (a dropped connection, a stopped database) waits a second and listens
  /// again, waking every waiter each time it starts.
  func startIfNeeded(
    _ listen:
      @escaping @Sendable (_ onAppend: @escaping @Sendable (UInt64) async -> Void) async throws(ServerLogError)
      -> Void
  ) {
    state.withLock { state in
      guard state.listener == nil, !state.stopped else { return }
      state.listener = Task { [weak self] in
        while !Task.isCancelled {
          guard let hints = self else { return }
          hints.wakeAll()
          try? await listen { [weak hints] position in hints?.announced(position) }
          try? await Task.sleep(for: .seconds(1))
        }
      }
    }
  }

  /// Suspends until an append after `position` is announced, the listener (re)starts, the hints stop or
  /// the task is cancelled.
  func wait(after position: UInt64) async {
    let id = state.withLock { state in
      defer { state.nextID += 1 }
      return state.nextID
    }
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        let now = state.withLock { state in
          if state.latest > position || state.stopped || Task.isCancelled { return true }
          state.waiters.append((id, position, continuation))
          return false
        }
        if now { continuation.resume() }
      }
    } onCancel: {
      let waiter = state.withLock { state in
        state.waiters.firstIndex { $0.id == id }.map { state.waiters.remove(at: $0) }
      }
      waiter?.continuation.resume()
    }
  }

  /// Stops listening and wakes every waiter.
  func stop() {
    let listener = state.withLock { state in
      state.stopped = true
      return state.listener
    }
    listener?.cancel()
    wakeAll()
  }

  private func announced(_ position: UInt64) {
    let woken = state.withLock { state in
      state.latest = max(state.latest, position)
      var woken: [CheckedContinuation<Void, Never>] = []
      state.waiters.removeAll { waiter in
        guard waiter.after < position else { return false }
        woken.append(waiter.continuation)
        return true
      }
      return woken
    }
    for continuation in woken { continuation.resume() }
  }

  private func wakeAll() {
    let woken = state.withLock { state in
      defer { state.waiters = [] }
      return state.waiters.map(\.continuation)
    }
    for continuation in woken { continuation.resume() }
  }
}
