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

/// The video service's blob routes and janitor on a node of a partitioned cluster: the blobs in the
/// database (every node reads every blob), the blob keys asked of the node serving each user's partition.
struct PartitionedVideoServing: Sendable {
  typealias Node = PartitionedEventHTTPServer<StoredVideoServer>

  let application: StoredVideoServer
  let blobs: any BlobStore
  let limits: RequestLimits
  let janitor: VideoBlobJanitor
  let interval: Duration
  let logger: Logger

  /// The ledger of the keys, each question routed to the node of the user it is about.
  static func ledger(
    _ application: StoredVideoServer,
    _ nodes: PartitionNodes<StoredVideoServer>
  ) -> StoredVideoBlobLedger<ContinuousClock> {
    StoredVideoBlobLedger(application: application) { user in
      if let user { try await nodes.node(for: user) } else { try await nodes.anyNode() }
    }
  }

  /// Every node runs the janitor: it abandons the stranded uploads of the users it serves (the others' wait
  /// for their node's run), and deleting a released blob twice is harmless.
  var janitorTask: Node.MaintenanceTask {
    Node.MaintenanceTask(name: "blob janitor", interval: interval) { [self] nodes in
      let deleted = try await janitor.run(
        ledger: Self.ledger(application, nodes),
        blobs: blobs,
        now: Timestamp(Date())
      )
      if !deleted.isEmpty { logger.info("blob janitor deleted \(deleted.count) blobs") }
    }
  }

  /// Adds the blob routes (`docs/protocol.md`, "Blobs").
  var routes: Node.ExtraRoutes {
    { [self] router, nodes, gate in
      BlobRoutes(ledger: Self.ledger(application, nodes), blobs: blobs, gate: gate, limits: limits) {
        Timestamp(Date())
      }.add(to: router)
    }
  }
}
