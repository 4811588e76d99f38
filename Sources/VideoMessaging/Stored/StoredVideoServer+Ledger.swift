import EventProtocol
import EventServer

/// The blob keys' questions, answered from the tables in a transaction: what ``StoredVideoBlobLedger`` asks
/// in order with the server's inputs, each the counterpart of one of ``VideoServer``'s.
extension StoredVideoServer {
  /// What the tables know of `key` (``VideoServer/blobBindings``).
  /// - Throws: `DatabaseError` when it cannot be read.
  public func binding(of key: BlobKey, in transaction: any DatabaseTransaction) async throws -> BlobBinding? {
    try await VideoTables(transaction: transaction).binding(key)
  }

  /// Whether `user` may read the blob under `key` (``VideoServer/mayRead(_:user:)``).
  /// - Throws: `DatabaseError` when it cannot be read.
  public func mayRead(_ key: BlobKey, user: UserID, in transaction: any DatabaseTransaction) async throws -> Bool {
    let tables = VideoTables(transaction: transaction)
    guard let binding = try await tables.binding(key), binding.releasedAt == nil, let id = binding.video,
      let video = try await tables.video(id), !video.blobReleased
    else { return false }
    return video.sender == user || video.recipient == user
  }

  /// The bytes of `user`'s blobs that count toward their bound (``VideoServer/storedBytes(of:)``).
  /// - Throws: `DatabaseError` when it cannot be read.
  public func storedBytes(of user: UserID, in transaction: any DatabaseTransaction) async throws -> Int {
    try await VideoTables(transaction: transaction).storedBytes(of: user)
  }

  /// The keys `user` has bound and no video claimed (``VideoServer/uploads(of:)``).
  /// - Throws: `DatabaseError` when it cannot be read.
  public func uploads(of user: UserID, in transaction: any DatabaseTransaction) async throws -> Set<BlobKey> {
    try await VideoTables(transaction: transaction).uploads(of: user)
  }

  /// The blobs in `listing` no tracked video claims that are older than `grace`, sorted
  /// (``VideoServer/unclaimedBlobs(in:now:grace:)``).
  /// - Complexity: One indexed lookup per blob older than `grace`.
  /// - Throws: `DatabaseError` when it cannot be read.
  public func unclaimedBlobs(
    in listing: [BlobInfo],
    now: Timestamp,
    grace: Duration,
    in transaction: any DatabaseTransaction
  ) async throws -> [BlobKey] {
    let tables = VideoTables(transaction: transaction)
    var unclaimed: [BlobKey] = []
    for blob in listing where blob.createdAt.advanced(by: grace) <= now {
      if try await !tables.isClaimed(blob.key) { unclaimed.append(blob.key) }
    }
    return unclaimed.sorted()
  }

  /// The blobs released and not yet deleted, sorted, forgotten by `transaction`
  /// (``VideoServer/takeBlobDeletions()``): bookkeeping, run with `EventServer/writeStoredBookkeeping(_:)`.
  /// - Throws: `DatabaseError` when they cannot be taken.
  public func takeBlobDeletions(in transaction: any DatabaseTransaction) async throws -> [BlobKey] {
    try await VideoTables(transaction: transaction).takeDeletions()
  }
}
