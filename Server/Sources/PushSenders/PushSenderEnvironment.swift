import EventProtocol

/// The time a push sender reads and waits on: the wall clock in a server, a script in tests (no test waits
/// on the wall clock for a backoff).
public struct PushSenderEnvironment: Sendable {
  /// The current time: signs tokens, sets expirations.
  public var now: @Sendable () -> Timestamp
  /// Waits before a retry.
  public var sleep: @Sendable (Duration) async throws -> Void

  /// An environment from its parts.
  public init(now: @escaping @Sendable () -> Timestamp, sleep: @escaping @Sendable (Duration) async throws -> Void) {
    self.now = now
    self.sleep = sleep
  }

  /// The wall clock, and `Task.sleep`.
  public static var live: PushSenderEnvironment {
    PushSenderEnvironment(now: { Timestamp.wallClockNow() }, sleep: { try await Task.sleep(for: $0) })
  }
}
