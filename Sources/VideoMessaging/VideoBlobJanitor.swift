import EventProtocol
import EventServer

/// The server side's blob clean-up: deletes the blobs the ``VideoServer`` released (videos downloaded,
/// viewed or deleted) and sweeps blobs no `uploaded` notice ever claimed once they are older than the grace
/// period (seed 000's stranded uploads).
///
/// ```swift
/// let janitor = VideoBlobJanitor(grace: .seconds(7 * 24 * 3600))
/// let deleted = try await janitor.run(server: server, blobs: blobs, now: now)
/// ```
public struct VideoBlobJanitor: Sendable {
  /// How old an unclaimed blob must be before it is swept: longer than an outbox plausibly retries an
  /// `uploaded` notice.
  public var grace: Duration

  /// Creates a janitor.
  public init(grace: Duration = .seconds(7 * 24 * 3600)) {
    self.grace = grace
  }

  /// Deletes the released blobs, then the stranded ones: a stranded upload is first abandoned on its
  /// uploader's behalf (a logged command), so its key is released for good and its bytes no longer count
  /// toward the uploader's bound.
  /// - Returns: The keys deleted.
  /// - Throws: ``BlobStoreError`` from the store; what was taken but not deleted is swept later.
  public func run<C: Clock>(
    server: EventServer<VideoServer, C>,
    blobs: some BlobStore,
    now: Timestamp
  ) async throws(BlobStoreError) -> [BlobKey] where C.Duration == Duration {
    let listing = try await blobs.list()
    let application = await server.application
    let stranded = application.unclaimedBlobs(in: listing, now: now, grace: grace)
    for key in stranded {
      guard let owner = application.uploadOwner(of: key), application.uploads(of: owner).contains(key) else {
        continue
      }
      // Refused only when the key changed meanwhile (its notice arrived): then it is not deleted below.
      _ = try? await server.handle(.uploadAbandoned(key), from: owner)
    }
    let released = await server.updateBookkeeping { $0.takeBlobDeletions() }
    let after = await server.application
    let stillStranded = stranded.filter { key in
      after.blobBindings[key].map { $0.video == nil || $0.releasedAt != nil } ?? true
    }
    let doomed = Array(Set(released + stillStranded)).sorted()
    for key in doomed { try await blobs.delete(key) }
    return doomed
  }
}
