import EventProtocol
import EventServer

/// What the blob routes and the janitor ask of the video server about blob keys (who owns each, who may
/// read it, what each user's blobs weigh, which to delete), whichever kind of server holds the bindings:
/// ``InMemoryVideoBlobLedger`` for a ``VideoServer``, ``StoredVideoBlobLedger`` for a ``StoredVideoServer``.
///
/// Changes go through ``handle(_:from:)``: a logged command, so a binding survives a restart.
///
/// ```swift
/// let ledger = InMemoryVideoBlobLedger(server: server)
/// if try await ledger.mayRead(key, user: "bob") { … }
/// ```
public protocol VideoBlobLedger: Sendable {
  /// The bounds on what each user may keep.
  var limits: VideoServerLimits { get async }

  /// What the server knows of `key`, or `nil` for a key it never bound (or forgot after its release).
  /// - Throws: When the server cannot answer (its database is unreachable).
  func binding(of key: BlobKey) async throws -> BlobBinding?

  /// Whether `user` may read the blob under `key` (``VideoServer/mayRead(_:user:)``).
  /// - Throws: When the server cannot answer.
  func mayRead(_ key: BlobKey, user: UserID) async throws -> Bool

  /// The bytes of `user`'s blobs the server counts (``VideoServer/storedBytes(of:)``) and the keys of their
  /// uploads in progress (``VideoServer/uploads(of:)``), read together.
  /// - Throws: When the server cannot answer.
  func usage(of user: UserID) async throws -> (storedBytes: Int, uploads: Set<BlobKey>)

  /// Applies `command` from `user` (a logged input, answered once durable).
  /// - Throws: `EventAPIError` when the server refuses it or cannot decide it now.
  func handle(_ command: VideoCommand, from user: UserID) async throws

  /// The blobs in `listing` no tracked video claims that are older than `grace`
  /// (``VideoServer/unclaimedBlobs(in:now:grace:)``).
  /// - Throws: When the server cannot answer.
  func unclaimedBlobs(in listing: [BlobInfo], now: Timestamp, grace: Duration) async throws -> [BlobKey]

  /// Hands over the blobs to delete and forgets them (``VideoServer/takeBlobDeletions()``).
  /// - Throws: When the server cannot answer; nothing is forgotten then.
  func takeBlobDeletions() async throws -> [BlobKey]
}
