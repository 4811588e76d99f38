import EventProtocol
import EventServer
import Foundation
import JSONCoding
import UpdateMachine
import UpdateMachineTesting
import VideoMessaging

/// The video app as a domain of the simulated world: the video server and reducer, the transfer queue and
/// files beside each engine, blob storage on the server's side, and the video invariants (statuses never go
/// back, retry waits grow, no download without a confirmed listing, histories match the server, every saved
/// video reaches its recipient).
enum VideoDomain: SimulatedDomain {
  typealias Application = VideoServer
  typealias Reducer = VideoReducer

  /// Blob storage and what the world remembers across kills.
  struct WorldState {
    /// Complete blobs and their sizes.
    var blobs: [BlobKey: Int] = [:]
    /// Blobs being uploaded, and their bytes so far.
    var blobPartials: [BlobKey: Int] = [:]
    /// A download a kill interrupted, to note its resumption.
    var resumedFrom: [Int: (video: VideoID, bytes: Int)] = [:]
    /// The draws of users browsing histories, apart from every other stream.
    var browsing: SeededRandomNumberGenerator
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

  /// The transfer queue and files beside a device's engine.
  struct DeviceState {
    var transfers: TransferQueue
    /// The transfer queue as of the last save: written with the next record, in the same atomic step. The
    /// record carries a save counter as its device data; the queue's own bytes are made when a kill needs
    /// them.
    var savedTransfers: TransferQueue?
    var diskTransfers: TransferQueue?
    var saves: UInt64 = 0
    var files: [BlobKey: LocalFile] = [:]
    var download: ActiveTransfer?
    var upload: ActiveTransfer?
    var transferGeneration = 0
    /// Failed steps in a row per transfer ("d:" or "u:" and the video), as the world saw them: what the
    /// queue's attempt count must match, so its retry waits grow.
    var failuresInARow: [String: Int] = [:]
    /// The statuses this device has shown for its sent videos (they must never go back).
    var shownStatuses: [VideoID: VideoStatus] = [:]
  }

  /// The video world's own happenings.
  enum Happening {
    /// One step of a transfer: a chunk moves, fails or moves short.
    case transferStep(device: Int, download: Bool, generation: Int)
    /// The user watches a video that arrived.
    case watch(device: Int, video: VideoID)
  }

  /// The world's state at the start of `scenario`.
  static func makeWorldState(scenario: Scenario) -> WorldState {
    WorldState(browsing: RandomStream.browsing.generator(seed: scenario.seed))
  }

  static func makeApplication(in world: WorldState) -> VideoServer { VideoServer() }

  static func makeReducer(for user: UserID, in world: WorldState) -> VideoReducer { VideoReducer() }

  static func makeDeviceState(device index: Int, epoch: Int, scenario: Scenario) -> DeviceState {
    DeviceState(transfers: makeTransferQueue(device: index, epoch: epoch, seed: scenario.seed))
  }

  /// A fresh transfer queue for device `index`'s launch number `epoch`.
  static func makeTransferQueue(device index: Int, epoch: Int, seed: UInt64) -> TransferQueue {
    var engine = RandomStream.engine.generator(seed: seed, device: index, epoch: epoch)
    _ = engine.next()
    return TransferQueue(seed: engine.next())
  }

  static func wholePart(of snapshot: VideoSnapshot) -> VideoSnapshot {
    var whole = snapshot
    whole.history = PartialState()
    return whole
  }

  static func device(of happening: Happening) -> Int? {
    switch happening {
    case .transferStep(let device, _, _), .watch(let device, _): device
    }
  }

  static func handle(_ happening: Happening, in world: inout SimulationWorld<Self>) {
    switch happening {
    case .transferStep(let device, let download, let generation):
      world.transferStep(device, download: download, generation: generation)
    case .watch(let device, let video):
      world.watch(device, video)
    }
  }

  static func userActs(_ index: Int, _ planned: DeviceScript.Recording, in world: inout SimulationWorld<Self>) {
    world.record(index, planned)
  }

  static func appOpened(_ index: Int, in world: inout SimulationWorld<Self>) {
    for video in world.devices[index].extra.transfers.library where !video.viewed {
      world.schedule(
        .domain(.watch(device: index, video: video.video.id)),
        after: DeviceScript.watchDelay(
          video.video.id,
          device: index,
          within: world.scenario.behaviour.watchAfterSeconds
        )
      )
    }
    world.browseHistory(index)
  }

  static func engineChanged(_ index: Int, in world: inout SimulationWorld<Self>) {
    world.checkHistory(index)
    world.checkShownStatuses(index)
    guard let state = world.devices[index].confirmedState else { return }
    let actions = world.devices[index].extra.transfers.confirmed(
      state,
      isConfirmedThisSession: world.devices[index].isConfirmedThisSession,
      now: world.now
    )
    world.performTransfers(actions, on: index)
  }

  static func networkChanged(_ index: Int, online: Bool, in world: inout SimulationWorld<Self>) {
    let actions =
      online
      ? world.devices[index].extra.transfers.networkBecameAvailable(now: world.now)
      : world.devices[index].extra.transfers.networkLost(now: world.now)
    world.performTransfers(actions, on: index)
  }

  static func timerFired(_ index: Int, in world: inout SimulationWorld<Self>) {
    world.performTransfers(world.devices[index].extra.transfers.timerFired(now: world.now), on: index)
  }

  static func nextWakeUp(_ index: Int, in world: SimulationWorld<Self>) -> Timestamp? {
    world.devices[index].extra.transfers.nextRetryAt
  }

  static func saved(_ index: Int, in world: inout SimulationWorld<Self>) {
    world.devices[index].extra.diskTransfers = world.devices[index].extra.savedTransfers
  }

  static func killing(_ index: Int, in world: inout SimulationWorld<Self>) {
    if let download = world.devices[index].extra.download {
      let bytes = world.devices[index].extra.files[TransferQueue.localKey(for: download.video)]?.bytes ?? 0
      if bytes > 0 {
        world.note(
          "device \(index) is killed mid-download of \(download.video.rawValue.prefix(13))… at byte \(bytes)"
        )
        world.domain.resumedFrom[index] = (download.video, bytes)
      }
    }
    world.devices[index].extra.download = nil
    world.devices[index].extra.upload = nil
  }

  static func launching(_ index: Int, in world: inout SimulationWorld<Self>) {
    let device = world.devices[index]
    // The saved queue goes through its real bytes, as it would from the record's device data.
    let savedQueue = device.extra.diskTransfers.flatMap { try? WireJSON.encodeData($0, sortedKeys: false) }
    device.extra.transfers =
      savedQueue.flatMap { try? WireJSON.decode(TransferQueue.self, from: $0) }
      ?? makeTransferQueue(device: index, epoch: device.epoch, seed: world.scenario.seed)
    device.extra.savedTransfers = device.extra.diskTransfers
    // The failures in a row carry over as saved (progress since the last save is not saved).
    device.extra.failuresInARow = [:]
    for download in device.extra.transfers.downloads where download.failures > 0 {
      device.extra.failuresInARow["d:\(download.video.id)"] = download.failures
    }
    for upload in device.extra.transfers.uploads where upload.failures > 0 {
      device.extra.failuresInARow["u:\(upload.notice.video)"] = upload.failures
    }
  }

  static func launched(_ index: Int, in world: inout SimulationWorld<Self>) {
    world.performTransfers(world.devices[index].extra.transfers.restarted(now: world.now), on: index)
  }

  static func serverCommitted(in world: inout SimulationWorld<Self>) {
    // Blobs are deleted only once their release is durable: a crash cannot bring back a video whose bytes
    // are gone.
    for key in world.server.updateBookkeeping({ $0.takeBlobDeletions() }) { world.domain.blobs[key] = nil }
  }

  /// A sender looks at a status the server has moved past.
  static func showsWrong(_ index: Int, server: VideoSnapshot, in world: SimulationWorld<Self>) -> Bool {
    let shown = world.devices[index].displayedState?.outgoing ?? []
    return shown.contains { video in
      server.outgoing.first { $0.id == video.id }.map { $0.status > video.status && video.status != .sending }
        ?? false
    }
  }

  static func convergenceGaps(in world: SimulationWorld<Self>) -> [String] {
    var gaps: [String] = []
    for device in world.devices {
      // The history held in part claims only what the server holds (``checkHistory(_:)`` at every step;
      // here at the end, with nothing left in flight).
      if let history = device.confirmedState?.history, !history.isEmpty {
        let user = device.user
        let application = world.server.application
        let problems = PartialStateCheck.problems(in: history) { try? application.fetch($0, for: user) }
        if let problem = problems.first { gaps.append("device \(device.index): \(problem)") }
      }
      let transfers = device.extra.transfers
      if !transfers.downloads.isEmpty || !transfers.uploads.isEmpty {
        gaps.append(
          "device \(device.index) has \(transfers.downloads.count) downloads and \(transfers.uploads.count) uploads left"
        )
      }
    }
    let durable = world.durableVideos
    let undelivered = durable.filter { !world.libraryVideos(of: $0.value).contains($0.key) }.map(\.key)
    if !undelivered.isEmpty {
      let names = undelivered.sorted().prefix(3).map { "\($0) to \(durable[$0]!)" }.joined(separator: ", ")
      gaps.append("\(undelivered.count) videos not delivered to their recipient (\(names))")
    }
    return gaps
  }

  static func outcomes(in world: SimulationWorld<Self>) -> (made: Int, completed: Int) {
    let durable = world.durableVideos
    return (durable.count, durable.filter { world.libraryVideos(of: $0.value).contains($0.key) }.count)
  }
}
