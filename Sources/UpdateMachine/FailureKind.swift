/// Why requests are failing, which decides the backoff and what coming back to the foreground does.
public enum FailureKind: Hashable, Sendable, CustomStringConvertible {
  /// No connection, a timeout or a cancellation: retried with the standard backoff, cut short by a return
  /// to the foreground or ``UpdateMachine/networkBecameAvailable()``.
  case connection
  /// The server answered 5xx: retried with the standard backoff, which a return to the foreground keeps.
  case server
  /// The server asked the client to slow down: its `retry-after` (clamped) is honoured.
  case rateLimited
  /// A malformed answer, another 4xx, or a reducer failure: the finger is dropped and the machine
  /// re-registers after the slower backoff.
  case protocolError

  public var description: String {
    switch self {
    case .connection: "connection"
    case .server: "server"
    case .rateLimited: "rate limited"
    case .protocolError: "protocol error"
    }
  }
}
