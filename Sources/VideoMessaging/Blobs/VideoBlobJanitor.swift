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
  /// - Parameters:
  ///   - ledger: The server's blob keys (``InMemoryVideoBlobLedger``, ``StoredVideoBlobLedger``).
  ///   - blobs: The store holding the files.
  ///   - now: The time the run judges the grace by.
  /// - Returns: The keys deleted.
  /// - Throws: ``BlobStoreError`` from the store, or the server's error when it cannot answer; what was
  ///   taken but not deleted is swept later.
  public func run(ledger: some VideoBlobLedger, blobs: some BlobStore, now: Timestamp) async throws -> [BlobKey] {
    let listing = try await blobs.list()
    let stranded = try await ledger.unclaimedBlobs(in: listing, now: now, grace: grace)
    var undecided: Set<BlobKey> = []
    for key in stranded {
      guard let binding = try await ledger.binding(of: key), binding.isUploading else { continue }
      do {
        try await ledger.handle(.uploadAbandoned(key), from: binding.owner)
      } catch let error as EventAPIError where error.code == .badRequest {
        // Refused: the key changed meanwhile (its notice arrived); then it is not deleted below.
      } catch {
        // Not decided now (the database did not answer, or the uploader's partition is served by another
        // node): the upload still counts as waiting, so its file stays for a later run to abandon it first.
        undecided.insert(key)
      }
    }
    let released = try await ledger.takeBlobDeletions()
    var stillStranded: [BlobKey] = []
    for key in stranded where !undecided.contains(key) {
      let binding = try await ledger.binding(of: key)
      if binding.map({ $0.video == nil || $0.releasedAt != nil }) ?? true { stillStranded.append(key) }
    }
    let doomed = Array(Set(released + stillStranded)).sorted()
    for key in doomed { try await blobs.delete(key) }
    return doomed
  }

  /// Runs the janitor on an in-memory ``VideoServer`` (``run(ledger:blobs:now:)``).
  /// - Returns: The keys deleted.
  /// - Throws: ``BlobStoreError`` from the store.
  public func run<C: Clock>(
    server: EventServer<VideoServer, C>,
    blobs: some BlobStore,
    now: Timestamp
  ) async throws(BlobStoreError) -> [BlobKey] where C.Duration == Duration {
    do {
      return try await run(ledger: InMemoryVideoBlobLedger(server: server), blobs: blobs, now: now)
    } catch let error as BlobStoreError {
      throw error
    } catch {
      // The in-memory ledger answers everything itself: only the store throws.
      preconditionFailure("an in-memory video server's ledger failed: \(error)")
    }
  }
}
