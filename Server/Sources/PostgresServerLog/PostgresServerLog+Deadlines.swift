import EventServer
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The bound on every database operation: a database that does not answer fails the call, never holds it.
extension PostgresServerLog {
  /// Runs `body` in a transaction that must end within ``operationTimeout``: a database that does not
  /// answer (stopped, unreachable, a pool waiting for a connection) fails the call instead of holding the
  /// request for ever. A transaction that commits after its deadline passed is harmless: its write was
  /// never answered, and the restart that follows the failure reads it back.
  func transaction<Result: Sendable>(
    _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
  ) async throws(ServerLogError) -> Result {
    try await withDeadline {
      try await self.client.withTransaction(logger: self.logger) { connection in try await body(connection) }
    }
  }

  /// Runs `operation`, failing it with ``ServerLogError/storage(_:)`` after ``operationTimeout``.
  ///
  /// The caller is answered at the deadline even when the operation does not end on cancellation (a pool
  /// waiting for a connection to a stopped database may not): the operation is cancelled and left to end
  /// on its own, and what it still does is harmless (a turn abandoned this way decides nothing, see
  /// ``appendTurn(after:_:)``; a write that commits late was never answered).
  func withDeadline<Result: Sendable>(
    _ operation: @escaping @Sendable () async throws -> Result
  ) async throws(ServerLogError) -> Result {
    let result = try await Self.withDeadline(operationTimeout, at: location, operation)
    outage.noteWorking(logger)
    return result
  }

  /// Runs `operation`, failing it with ``ServerLogError/storage(_:)`` naming `location` after `timeout`: the
  /// bound every database operation of a node has (a host stopping a partition's node, say, gives up on it
  /// after its bound). The operation is cancelled at the deadline; what it does after is never answered.
  ///
  /// ```swift
  /// let rows = try await PostgresServerLog.withDeadline(.seconds(5), at: log.location) { try await read() }
  /// ```
  /// - Parameters:
  ///   - timeout: How long the operation may take.
  ///   - location: What the failure names (the database's host and name).
  ///   - onTimeout: Runs when the deadline, not the operation, gave the answer, before the caller resumes.
  ///   - operation: The work.
  /// - Returns: What `operation` returned.
  /// - Throws: ``ServerLogError/storage(_:)`` at the deadline, or what `operation` threw (wrapped in
  ///   ``ServerLogError/storage(_:)`` when it is not a ``ServerLogError``).
  public static func withDeadline<Result: Sendable>(
    _ timeout: Duration,
    at location: String,
    onTimeout: @escaping @Sendable () -> Void = {},
    _ operation: @escaping @Sendable () async throws -> Result
  ) async throws(ServerLogError) -> Result {
    let answer = FirstAnswer<Result>()
    let outcome = await withCheckedContinuation { continuation in
      answer.install(continuation)
      let work = Task {
        do {
          answer.give(.success(try await operation()))
        } catch let error as ServerLogError {
          answer.give(.failure(error))
        } catch {
          answer.give(.failure(.storage("\(location): \(String(reflecting: error))")))
        }
      }
      Task {
        try? await Task.sleep(for: timeout)
        work.cancel()
        // The timeout's consequences (leases marked lost, say) are in place before the caller hears of it.
        answer.give(.failure(.storage("\(location): no answer within \(timeout)")), first: onTimeout)
      }
    }
    return try outcome.get()
  }
}

/// The first of several answers (an operation's, its deadline's), given to one waiting caller.
final class FirstAnswer<Value: Sendable>: Sendable {
  private let state = Mutex<(continuation: CheckedContinuation<Result<Value, ServerLogError>, Never>?, given: Bool)>(
    (nil, false)
  )

  func install(_ continuation: CheckedContinuation<Result<Value, ServerLogError>, Never>) {
    state.withLock { $0.continuation = continuation }
  }

  /// Gives `result` unless an answer was given already; when it is the answer, runs `first` before the
  /// caller resumes (so that what the caller reads next already shows what `first` did).
  /// - Returns: Whether this was the answer given.
  @discardableResult
  func give(_ result: Result<Value, ServerLogError>, first: () -> Void = {}) -> Bool {
    let continuation = state.withLock { state -> CheckedContinuation<Result<Value, ServerLogError>, Never>? in
      guard !state.given else { return nil }
      state.given = true
      defer { state.continuation = nil }
      return state.continuation
    }
    guard let continuation else { return false }
    first()
    continuation.resume(returning: result)
    return true
  }
}
