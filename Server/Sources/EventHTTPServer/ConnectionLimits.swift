/// How many connections the server keeps, and how long one may stay without proving who it is from.
///
/// A connection is *unauthenticated* until a request on it is admitted (a valid key, within the user's rate
/// limit): then it is its user's, and each user holds at most ``maximumConnectionsPerUser``. Unauthenticated
/// connections are capped per peer address and closed when they have not authenticated within
/// ``unauthenticatedTimeout``; when the total cap is reached, a new connection takes the place of the oldest
/// unauthenticated one, else of the oldest connection of the user holding the most (closed at once only when
/// every user holds one). So neither a flood of idle connections nor one user's many connections can fill
/// the server's file descriptors and keep other users out.
///
/// Behind a proxy every connection comes from the proxy's address: the proxy must then enforce the caps per
/// client (`docs/security.md`, "What the proxy in front enforces").
public struct ConnectionLimits: Sendable, Hashable {
  /// The most connections open at once: by default three quarters of the process's file-descriptor limit,
  /// at most 16,384.
  public var maximumConnections: Int
  /// The most unauthenticated connections one peer address may hold at once (a connection counts until its
  /// first request passes authentication, a few milliseconds for a client with a key; an HTTP client may
  /// open dozens at once).
  public var maximumUnauthenticatedPerPeer = 256
  /// How long a connection may stay open without an authenticated request.
  public var unauthenticatedTimeout: Duration = .seconds(10)
  /// The most connections one user may hold at once (a device keeps one or two: a long-poll and a write);
  /// one more closes that user's oldest. By default 64, at most a sixteenth of ``maximumConnections``.
  /// Keep it above the event server's `maximumQueuesPerUser` (32 by default): each queue's parked poll holds
  /// a connection of its own.
  public var maximumConnectionsPerUser: Int

  /// The defaults, from this process's file-descriptor limit.
  public init() {
    maximumConnections = max(64, min(16_384, FileDescriptorLimit.current * 3 / 4))
    maximumConnectionsPerUser = max(4, min(64, maximumConnections / 16))
  }
}
