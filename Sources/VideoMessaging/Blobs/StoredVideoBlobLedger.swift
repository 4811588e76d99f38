import EventProtocol
import EventServer

/// The blob keys of a ``StoredVideoServer``, read from its tables in order with its inputs
/// (`EventServer/readStoredState(_:)`).
///
/// One server answers everything, or, on a partitioned log, the node serving each user's partition: a
/// command goes to its user's node, and a question about a key (which no user's partition owns) to any node
/// this process serves, since every partition's node reads the same tables.
public struct StoredVideoBlobLedger<C: Clock>: VideoBlobLedger where C.Duration == Duration {
  /// A server of the video service, as the ledger reaches it.
  public typealias Server = EventServer<StoredRelay<StoredVideoServer>, C>

  public var limits: VideoServerLimits { application.limits }
  private let application: StoredVideoServer
  /// The server for `user`'s requests (`nil`: any server this process runs).
  private let server: @Sendable (UserID?) async throws -> Server

  /// The ledger of the blob keys of `application`, served by `server`.
  public init(server: Server, application: StoredVideoServer) {
    self.init(application: application) { _ in server }
  }

  /// The ledger of the blob keys of `application` on a partitioned log: `server(user)` is the node serving
  /// `user`'s partition here (`server(nil)`: any node served here).
  /// - Parameters:
  ///   - application: The stored video service whose tables hold the keys.
  ///   - server: Throws when no node here can answer (the partition is moving).
  public init(application: StoredVideoServer, server: @escaping @Sendable (UserID?) async throws -> Server) {
    self.application = application
    self.server = server
  }

  public func binding(of key: BlobKey) async throws -> BlobBinding? {
    try await server(nil).readStoredState { [application] in try await application.binding(of: key, in: $0) }
  }

  public func mayRead(_ key: BlobKey, user: UserID) async throws -> Bool {
    try await server(user).readStoredState { [application] in
      try await application.mayRead(key, user: user, in: $0)
    }
  }

  public func usage(of user: UserID) async throws -> (storedBytes: Int, uploads: Set<BlobKey>) {
    let (bytes, uploads) = try await server(user).readStoredState { [application] transaction in
      (
        try await application.storedBytes(of: user, in: transaction),
        try await application.uploads(of: user, in: transaction)
      )
    }
    return (bytes, uploads)
  }

  public func handle(_ command: VideoCommand, from user: UserID) async throws {
    try await server(user).handle(.request(command), from: user)
  }

  public func unclaimedBlobs(in listing: [BlobInfo], now: Timestamp, grace: Duration) async throws -> [BlobKey] {
    try await server(nil).readStoredState { [application] in
      try await application.unclaimedBlobs(in: listing, now: now, grace: grace, in: $0)
    }
  }

  public func takeBlobDeletions() async throws -> [BlobKey] {
    try await server(nil).writeStoredBookkeeping { [application] in
      try await application.takeBlobDeletions(in: $0)
    }
  }
}
