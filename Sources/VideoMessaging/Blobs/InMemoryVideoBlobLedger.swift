import EventProtocol
import EventServer

/// The blob keys of an in-memory ``VideoServer``, read from the server's state.
public struct InMemoryVideoBlobLedger<C: Clock>: VideoBlobLedger where C.Duration == Duration {
  /// The server.
  public let server: EventServer<VideoServer, C>

  /// The ledger of `server`'s blob keys.
  public init(server: EventServer<VideoServer, C>) {
    self.server = server
  }

  public var limits: VideoServerLimits {
    get async { await server.application.limits }
  }

  public func binding(of key: BlobKey) async -> BlobBinding? { await server.application.blobBindings[key] }

  public func mayRead(_ key: BlobKey, user: UserID) async -> Bool {
    await server.application.mayRead(key, user: user)
  }

  public func usage(of user: UserID) async -> (storedBytes: Int, uploads: Set<BlobKey>) {
    let application = await server.application
    return (application.storedBytes(of: user), application.uploads(of: user))
  }

  public func handle(_ command: VideoCommand, from user: UserID) async throws {
    try await server.handle(command, from: user)
  }

  public func unclaimedBlobs(in listing: [BlobInfo], now: Timestamp, grace: Duration) async -> [BlobKey] {
    await server.application.unclaimedBlobs(in: listing, now: now, grace: grace)
  }

  public func takeBlobDeletions() async -> [BlobKey] {
    await server.updateBookkeeping { $0.takeBlobDeletions() }
  }
}
