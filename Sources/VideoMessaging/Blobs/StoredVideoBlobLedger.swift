import EventProtocol
import EventServer

/// The blob keys of a ``StoredVideoServer``, read from its tables in order with its inputs
/// (``EventServer/readStoredState(_:)``).
public struct StoredVideoBlobLedger<C: Clock>: VideoBlobLedger where C.Duration == Duration {
  /// The server.
  public let server: EventServer<StoredRelay<StoredVideoServer>, C>
  public var limits: VideoServerLimits { application.limits }
  private let application: StoredVideoServer

  /// The ledger of the blob keys of `application`, served by `server`.
  public init(server: EventServer<StoredRelay<StoredVideoServer>, C>, application: StoredVideoServer) {
    self.server = server
    self.application = application
  }

  public func binding(of key: BlobKey) async throws -> BlobBinding? {
    try await server.readStoredState { [application] in try await application.binding(of: key, in: $0) }
  }

  public func mayRead(_ key: BlobKey, user: UserID) async throws -> Bool {
    try await server.readStoredState { [application] in try await application.mayRead(key, user: user, in: $0) }
  }

  public func usage(of user: UserID) async throws -> (storedBytes: Int, uploads: Set<BlobKey>) {
    let (bytes, uploads) = try await server.readStoredState { [application] transaction in
      (
        try await application.storedBytes(of: user, in: transaction),
        try await application.uploads(of: user, in: transaction)
      )
    }
    return (bytes, uploads)
  }

  public func handle(_ command: VideoCommand, from user: UserID) async throws {
    try await server.handle(.request(command), from: user)
  }

  public func unclaimedBlobs(in listing: [BlobInfo], now: Timestamp, grace: Duration) async throws -> [BlobKey] {
    try await server.readStoredState { [application] in
      try await application.unclaimedBlobs(in: listing, now: now, grace: grace, in: $0)
    }
  }

  public func takeBlobDeletions() async throws -> [BlobKey] {
    try await server.writeStoredBookkeeping { [application] in try await application.takeBlobDeletions(in: $0) }
  }
}
