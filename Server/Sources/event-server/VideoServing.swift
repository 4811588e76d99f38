import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import Hummingbird
import Logging
import VideoBlobRoutes
import VideoMessaging

/// The video service's parts beside the events API, for either kind of video server: the blob routes and
/// the blob janitor, over the blob store (the data directory's `blobs` folder unless another is given),
/// reading the server's blob keys through `ledger`.
struct VideoServing<Application: ServerApplication>: Sendable {
  let blobs: any BlobStore
  let limits: RequestLimits
  let janitor: VideoBlobJanitor
  let interval: Duration
  let logger: Logger
  let ledger: @Sendable (EventServer<Application, ContinuousClock>) -> any VideoBlobLedger

  init(
    options: Options,
    blobs: (any BlobStore)? = nil,
    limits: RequestLimits,
    logger: Logger,
    ledger: @escaping @Sendable (EventServer<Application, ContinuousClock>) -> any VideoBlobLedger
  ) {
    self.blobs = blobs ?? FileBlobStore(directory: options.dataDirectory.appendingPathComponent("blobs"))
    self.limits = limits
    self.janitor = VideoBlobJanitor(grace: options.blobGrace)
    self.interval = options.janitorInterval
    self.logger = logger
    self.ledger = ledger
  }

  /// Deletes released and stranded blobs every `--janitor-interval`.
  var janitorTask: PeriodicTask<Application> {
    PeriodicTask(name: "blob janitor", interval: interval) { [self] events in
      let deleted = try await janitor.run(ledger: ledger(events), blobs: blobs, now: Timestamp(Date()))
      if !deleted.isEmpty { logger.info("blob janitor deleted \(deleted.count) blobs") }
    }
  }

  /// Adds the blob routes (`docs/protocol.md`, "Blobs").
  func addRoutes(
    to router: Router<EventRequestContext>,
    events: EventServer<Application, ContinuousClock>,
    gate: RequestGate
  ) {
    BlobRoutes(ledger: ledger(events), blobs: blobs, gate: gate, limits: limits) { Timestamp(Date()) }.add(to: router)
  }
}
