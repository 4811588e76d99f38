import EventServer
import Synchronization

/// The `event_log` notifications as hints for a node that follows the log: ``wait(after:)`` returns once
/// an append past a position was announced, or when the listening connection starts listening again (what
/// was sent while nobody listened is lost, so every waiter reads the log then).
final class AppendHints: Sendable {
  /// What a listening connection tells the hints: that its `LISTEN` is in effect, and each announcement.
  struct Sink: Sendable {
    /// The connection listens now: anything announced from here on is heard.
    let listening: @Sendable () -> Void
    /// An announcement of this position was heard.
    let announced: @Sendable (UInt64) async -> Void
  }

  /// What a waiter waits for.
  private enum Awaited: Sendable {
    /// An append after this position announced (``wait(after:)``).
    case append(after: UInt64)
    /// The connection's `LISTEN` in effect (``untilListening()``).
    case listening
  }

  private struct State {
    var latest: UInt64 = 0
    var waiters: [(id: Int, awaited: Awaited, continuation: CheckedContinuation<Void, Never>)] = []
    var nextID = 0
    var listener: Task<Void, Never>?
    var stopped = false
    /// Whether the connection's `LISTEN` is in effect now.
    var listening = false

    /// Whether what `awaited` names has happened (or the hints stopped).
    func holds(_ awaited: Awaited) -> Bool {
      if stopped { return true }
      switch awaited {
      case .append(let position): return latest > position
      case .listening: return listening
      }
    }
  }

  private let state = Mutex(State())

  /// The newest position a notification announced (0 before the first).
  var latest: UInt64 { state.withLock { $0.latest } }

  /// Starts the listening task on the first call: it runs `listen` (which reports, through its sink, when
  /// its `LISTEN` is in effect and each announced position), and when that ends (a dropped connection, a
  /// stopped database) waits a second and listens again. Each time the `LISTEN` takes effect, every waiter
  /// is woken: what was announced before it was not heard.
  func startIfNeeded(_ listen: @escaping @Sendable (Sink) async throws(ServerLogError) -> Void) {
    state.withLock { state in
      guard state.listener == nil, !state.stopped else { return }
      state.listener = Task { [weak self] in
        while !Task.isCancelled {
          guard let hints = self else { return }
          let sink = Sink(
            listening: { [weak hints] in hints?.listeningStarted() },
            announced: { [weak hints] position in hints?.announced(position) }
          )
          try? await listen(sink)
          hints.state.withLock { $0.listening = false }
          try? await Task.sleep(for: .seconds(1))
        }
      }
    }
  }

  /// Returns once the connection listens (at once when it does already), the hints stop, or the task is
  /// cancelled: a node that is about to ask the others for an answer waits for this first, so that their
  /// answer is not sent before anyone listens.
  func untilListening() async { await park(until: .listening) }

  /// The `LISTEN` took effect: every waiter reads again (what was announced before was not heard), and
  /// whoever waited for listening goes on.
  private func listeningStarted() {
    state.withLock { $0.listening = true }
    wakeAll()
  }

  /// Suspends until an append after `position` is announced, the listener (re)starts, the hints stop or
  /// the task is cancelled.
  func wait(after position: UInt64) async { await park(until: .append(after: position)) }

  /// Suspends until `awaited` holds, a wake-up of every waiter, or the task's cancellation.
  private func park(until awaited: Awaited) async {
    let id = state.withLock { state in
      defer { state.nextID += 1 }
      return state.nextID
    }
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        let now = state.withLock { state in
          if state.holds(awaited) || Task.isCancelled { return true }
          state.waiters.append((id, awaited, continuation))
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
        guard case .append(let after) = waiter.awaited, after < position else { return false }
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
