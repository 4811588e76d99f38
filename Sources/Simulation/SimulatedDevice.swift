import EventProtocol
import EventServer
import Foundation
import UpdateMachine
import VideoMessaging

/// One installation of the video app inside the simulation: the engine's pure core and the transfer queue,
/// its persisted bytes and files (which survive a kill), and what the world tracks about it.
struct SimulatedDevice {
  typealias Core = UpdateMachineCore<VideoSnapshot, VideoEvent, VideoCommand>

  /// A request on its way.
  enum Exchange {
    case register
    case poll(EventFinger, dontBlock: Bool)
    case submit(MutationRequest<VideoCommand>)
    case fetch(FetchRequest, QueueID)
  }

  /// A file on the device: its bytes so far and whether it is complete.
  struct LocalFile: Hashable {
    var bytes: Int
    var complete: Bool
  }

  /// The transfer under way and its generation (a cancelled one's late steps are ignored).
  struct ActiveTransfer: Hashable {
    var video: VideoID
    var generation: Int
  }

  let index: Int
  let user: UserID
  var core: Core
  var transfers: TransferQueue
  /// What is on disk: the last record saved (its bytes are made when a kill needs them, which keeps the
  /// simulation fast; the restore then goes through the real bytes).
  var disk: PersistedRecord<VideoSnapshot, VideoCommand>?
  /// The transfer queue as of the last save: written with the next record, in the same atomic step. The
  /// record carries a save counter as its device data; the queue's own bytes are made when a kill needs them.
  var savedTransfers: TransferQueue?
  var diskTransfers: TransferQueue?
  var saves: UInt64 = 0
  var files: [BlobKey: LocalFile] = [:]
  var appOpen = false
  var online = true
  var outstanding: [RequestID: Exchange] = [:]
  var parked: [RequestID: PollID] = [:]
  var download: ActiveTransfer?
  /// Failed steps in a row per transfer ("d:" or "u:" and the video), as the world saw them: what the
  /// queue's attempt count must match, so its retry waits grow.
  var failuresInARow: [String: Int] = [:]
  var upload: ActiveTransfer?
  var transferGeneration = 0
  var timerAt: Timestamp?
  var timerGeneration = 0
  /// The latest server version of the user's snapshot this device's confirmed state has shown.
  var shownVersion = 0
  /// The statuses this device has shown for its sent videos (they must never go back).
  var shownStatuses: [VideoID: VideoStatus] = [:]
  /// Whether a request has succeeded since the last disconnection (freshness may say live only then).
  var reachedServer = false
  var lastFreshnessSample: Timestamp
  var freshnessSeconds: [String: Double] = [:]
  var wrongStatusSeconds = 0.0
  /// When the app, open, started showing a status the server had moved past.
  var wrongSince: Timestamp?
  /// When the shown freshness changed (at most 2,000 changes are kept).
  var freshnessChanges: [FreshnessChange] = []
  var longestWrongStatus = 0.0
  var openSeconds = 0.0
  var requests = 0
  var bytes = 0
  var registrations = 0
  /// How many times the app was killed: actions computed before a kill are not performed after it.
  var epoch = 0
  var pushesLost = 0

  init(index: Int, user: UserID, core: Core, transfers: TransferQueue, now: Timestamp) {
    self.index = index
    self.user = user
    self.core = core
    self.transfers = transfers
    self.lastFreshnessSample = now
  }

  /// What a freshness is called in the report.
  static func name(_ freshness: Freshness) -> String {
    switch freshness {
    case .live: "live"
    case .settling: "settling"
    case .connecting: "connecting"
    case .cannotConnect: "cannot connect"
    }
  }
}
