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
    try await server.readStoredState { try await VideoTables(transaction: $0).binding(key) }
  }

  public func mayRead(_ key: BlobKey, user: UserID) async throws -> Bool {
    try await server.readStoredState { transaction in
      let tables = VideoTables(transaction: transaction)
      guard let binding = try await tables.binding(key), binding.releasedAt == nil, let id = binding.video,
        let video = try await tables.video(id), !video.blobReleased
      else { return false }
      return video.sender == user || video.recipient == user
    }
  }

  public func usage(of user: UserID) async throws -> (storedBytes: Int, uploads: Set<BlobKey>) {
    let (bytes, uploads) = try await server.readStoredState { transaction in
      let tables = VideoTables(transaction: transaction)
      return (try await tables.storedBytes(of: user), try await tables.uploads(of: user))
    }
    return (bytes, uploads)
  }

  public func handle(_ command: VideoCommand, from user: UserID) async throws {
    try await server.handle(.request(command), from: user)
  }

  public func unclaimedBlobs(in listing: [BlobInfo], now: Timestamp, grace: Duration) async throws -> [BlobKey] {
    let old = listing.filter { $0.createdAt.advanced(by: grace) <= now }.map(\.key)
    return try await server.readStoredState { transaction in
      let tables = VideoTables(transaction: transaction)
      var unclaimed: [BlobKey] = []
      for key in old where try await !tables.isClaimed(key) { unclaimed.append(key) }
      return unclaimed.sorted()
    }
  }

  public func takeBlobDeletions() async throws -> [BlobKey] {
    try await server.writeStoredBookkeeping { try await VideoTables(transaction: $0).takeDeletions() }
  }
}
