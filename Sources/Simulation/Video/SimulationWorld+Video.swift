import EventProtocol
import EventServer
import Foundation
import UpdateMachine
import UpdateMachineTesting
import VideoMessaging

/// The video app in the simulated world's terms: videos recorded while the app is open, uploaded and
/// downloaded by the transfer queue in chunks over a network that fails and truncates, statuses a sender
/// must see right, conversation histories browsed as partial state.
extension SimulationWorld where Domain == VideoDomain {
  // MARK: - Transfers

  mutating func performTransfers(_ actions: [TransferQueue.Action], on index: Int) {
    let epoch = devices[index].epoch
    for action in actions where devices[index].epoch == epoch {
      switch action {
      case .download(let video, _):
        if devices[index].confirmedState?.incoming.contains(where: { $0.id == video.id }) != true {
          violations.append("device \(index) started downloading \(video.id), which its confirmed state does not list")
        }
        if let resumed = domain.resumedFrom[index], resumed.video == video.id {
          note("device \(index) resumes the download it was killed in, from byte \(resumed.bytes) of \(video.size)")
          domain.resumedFrom[index] = nil
        }
        traceLine("device \(index) starts downloading \(video.id)")
        devices[index].extra.transferGeneration += 1
        devices[index].extra.download = .init(video: video.id, generation: devices[index].extra.transferGeneration)
        schedule(
          .domain(.transferStep(device: index, download: true, generation: devices[index].extra.transferGeneration)),
          after: latency(device: index)
        )
      case .cancelDownload:
        devices[index].extra.download = nil
      case .upload(let notice, _):
        devices[index].extra.transferGeneration += 1
        devices[index].extra.upload = .init(video: notice.video, generation: devices[index].extra.transferGeneration)
        schedule(
          .domain(.transferStep(device: index, download: false, generation: devices[index].extra.transferGeneration)),
          after: latency(device: index)
        )
      case .deliver(let delivered):
        traceLine("device \(index) delivers \(delivered.video.id)")
        if devices[index].appOpen {
          schedule(
            .domain(.watch(device: index, video: delivered.video.id)),
            after: DeviceScript.watchDelay(
              delivered.video.id,
              device: index,
              within: scenario.behaviour.watchAfterSeconds
            )
          )
        }
      case .abandon(let video, let reason):
        traceLine("device \(index) gives up \(video): \(reason)")
      case .discardLocal(let key):
        devices[index].extra.files[key] = nil
      case .submit(let command):
        let (_, engineActions) = devices[index].core.submit(command, now: now)
        perform(engineActions, on: index)
      case .save:
        devices[index].extra.saves += 1
        devices[index].extra.savedTransfers = devices[index].extra.transfers
        let token = withUnsafeBytes(of: devices[index].extra.saves) { Data($0) }
        perform(devices[index].core.deviceDataChanged(token, now: now), on: index)
      }
    }
    rescheduleTimer(index)
  }

  static let chunkBytes = 256 << 10

  /// One step of a transfer: a chunk moves (or fails, or moves short) after the network's time for it.
  mutating func transferStep(_ index: Int, download isDownload: Bool, generation: Int) {
    let active = isDownload ? devices[index].extra.download : devices[index].extra.upload
    guard let active, active.generation == generation else { return }
    let failed = !devices[index].online || (faultsOn && chance(faults.blobFailure, device: index))
    var chunk = Self.chunkBytes
    if faultsOn && chance(faults.blobTruncation, device: index) { chunk /= 3 }
    if isDownload {
      guard let item = devices[index].extra.transfers.downloads.first(where: { $0.video.id == active.video }) else {
        return
      }
      let key = TransferQueue.localKey(for: item.video.id)
      guard domain.blobs[item.video.blobKey] != nil || devices[index].extra.files[key]?.complete == true else {
        devices[index].extra.download = nil
        guard wakeForTransfer(index) else { return }
        performTransfers(
          devices[index].extra.transfers.downloadFailed(item.video.id, .gone(item.video.blobKey), now: now),
          on: index
        )
        return
      }
      if failed {
        devices[index].extra.download = nil
        guard wakeForTransfer(index) else { return }
        performTransfers(
          devices[index].extra.transfers.downloadFailed(item.video.id, .unavailable("network"), now: now),
          on: index
        )
        checkRetryWaitGrows(index, "d:\(item.video.id)")
        return
      }
      devices[index].extra.failuresInARow["d:\(item.video.id)"] = nil
      var file = devices[index].extra.files[key] ?? .init(bytes: 0, complete: false)
      file.bytes = min(item.video.size, file.bytes + chunk)
      file.complete = file.bytes == item.video.size
      devices[index].extra.files[key] = file
      devices[index].contentBytes += chunk
      if file.complete {
        devices[index].extra.download = nil
        guard wakeForTransfer(index) else { return }
        performTransfers(devices[index].extra.transfers.downloadFinished(item.video.id, now: now), on: index)
      } else {
        devices[index].extra.transfers.downloadProgressed(item.video.id, bytesDone: file.bytes)
        schedule(
          .domain(.transferStep(device: index, download: true, generation: generation)),
          after: transferTime(chunk, device: index)
        )
      }
    } else {
      guard let item = devices[index].extra.transfers.uploads.first(where: { $0.notice.video == active.video }) else {
        return
      }
      if failed {
        devices[index].extra.upload = nil
        guard wakeForTransfer(index) else { return }
        performTransfers(devices[index].extra.transfers.uploadFailed(item.notice.video, now: now), on: index)
        checkRetryWaitGrows(index, "u:\(item.notice.video)")
        return
      }
      devices[index].extra.failuresInARow["u:\(item.notice.video)"] = nil
      let key = item.notice.blobKey
      if domain.blobs[key] == nil {
        domain.blobPartials[key] = min(item.notice.size, (domain.blobPartials[key] ?? 0) + chunk)
        devices[index].contentBytes += chunk
        if domain.blobPartials[key] == item.notice.size {
          domain.blobPartials[key] = nil
          domain.blobs[key] = item.notice.size
        }
      }
      if domain.blobs[key] != nil {
        devices[index].extra.upload = nil
        guard wakeForTransfer(index) else { return }
        performTransfers(devices[index].extra.transfers.uploadFinished(item.notice.video, now: now), on: index)
      } else {
        devices[index].extra.transfers.uploadProgressed(item.notice.video, bytesDone: domain.blobPartials[key] ?? 0)
        schedule(
          .domain(.transferStep(device: index, download: false, generation: generation)),
          after: transferTime(chunk, device: index)
        )
      }
    }
  }

  /// A chunk's time on a 2 MB/s link, plus latency.
  mutating func transferTime(_ bytes: Int, device index: Int) -> Duration {
    latency(device: index) + .milliseconds(Int64(bytes / 2_000))
  }
  mutating func record(_ index: Int, _ planned: DeviceScript.Recording) {
    let user = devices[index].user
    let friends = users.filter { $0 != user }
    let recipient = friends.isEmpty ? user : friends[Int(planned.recipientDraw % UInt64(friends.count))]
    let localKey = BlobKey(rawValue: "outgoing/\(planned.video.rawValue)")
    devices[index].extra.files[localKey] = .init(bytes: planned.bytes, complete: true)
    traceLine("device \(index) records \(planned.video) for \(recipient)")
    let notice = VideoUpload(
      video: planned.video,
      recipient: recipient,
      blobKey: .forVideo(planned.video),
      size: planned.bytes
    )
    performTransfers(devices[index].extra.transfers.recorded(notice, localKey: localKey, now: now), on: index)
  }

  mutating func watch(_ index: Int, _ video: VideoID) {
    guard devices[index].appOpen else { return }
    performTransfers(devices[index].extra.transfers.viewed(video), on: index)
  }

  /// The user looks at a conversation's history: the newest page, then older ones from the oldest video
  /// known. Draws come from a stream of their own.
  mutating func browseHistory(_ index: Int) {
    let pages = scenario.behaviour.historyPagesPerOpen
    guard pages > 0 else { return }
    let user = devices[index].user
    let friend = users[Int.random(in: users.indices, using: &domain.browsing)]
    let narrow = VideoHistory.conversation(between: user, and: friend)
    var requests = [FetchRequest(narrow: narrow, anchor: .newest, before: 4, after: 0)]
    if pages > 1, let state = devices[index].confirmedState {
      let list = state.history.list(narrow)
      if let oldest = list.items.first?.position, !list.reachesOldest {
        requests.append(FetchRequest(narrow: narrow, anchor: .position(oldest), before: 4, after: 0))
      }
    }
    for request in requests.prefix(pages) {
      let (_, actions) = devices[index].core.fetch(request, now: now)
      perform(actions, on: index)
    }
  }

  /// Retry waits grow: the n-th failed step in a row of a transfer waits up to 2^(n-1) s (jittered, capped
  /// at 5 minutes), so the queue's attempt count must be n, whatever retries started in between.
  mutating func checkRetryWaitGrows(_ index: Int, _ transfer: String) {
    let seen = devices[index].extra.failuresInARow[transfer, default: 0] + 1
    devices[index].extra.failuresInARow[transfer] = seen
    let isDownload = transfer.hasPrefix("d:")
    let video = VideoID(rawValue: String(transfer.dropFirst(2)))
    let state: (attempts: Int, retryAt: Timestamp)? =
      if isDownload {
        devices[index].extra.transfers.downloads.first { $0.video.id == video }.flatMap {
          if case .failed(let attempts, let retryAt) = $0.state { (attempts, retryAt) } else { nil }
        }
      } else {
        devices[index].extra.transfers.uploads.first { $0.notice.video == video }.flatMap {
          if case .failed(let attempts, let retryAt) = $0.state { (attempts, retryAt) } else { nil }
        }
      }
    guard let state else {
      // The failure did not leave the transfer waiting (it moved on, or started again at once): follow
      // the queue's own count from here.
      devices[index].extra.failuresInARow[transfer] =
        isDownload
        ? devices[index].extra.transfers.downloads.first { $0.video.id == video }?.failures
        : devices[index].extra.transfers.uploads.first { $0.notice.video == video }?.failures
      return
    }
    let bound = TransferQueue.backoff.bound(attempt: seen)
    if state.attempts != seen || now.duration(to: state.retryAt) > bound {
      violations.append(
        "device \(index): failure \(seen) in a row of \(transfer) waits as attempt \(state.attempts) "
          + "(retry waits must grow)"
      )
    }
  }

  /// A status shown to a sender never goes back for the same video.
  /// Raises `shown` to `status` when `status` is further along; returns what it was.
  static func raise(_ shown: inout VideoStatus, to status: VideoStatus) -> VideoStatus {
    let before = shown
    shown = max(shown, status)
    return before
  }

  mutating func checkShownStatuses(_ index: Int) {
    guard let shown = devices[index].displayedState else { return }
    let device = devices[index]
    for video in shown.outgoing {
      // One lookup of the video's id for both the check and the update (hashing ids was 2 % of the time).
      let before = Self.raise(&device.extra.shownStatuses[video.id, default: video.status], to: video.status)
      if video.status < before {
        violations.append("device \(index) showed \(video.id) as \(before), then \(video.status)")
      }
    }
  }

  /// No known history item differs from the server's at the device's finger: the device's history, with
  /// the events still queued after its finger applied, must claim only what the server holds now.
  mutating func checkHistory(_ index: Int) {
    guard scenario.behaviour.historyPagesPerOpen > 0, let confirmed = devices[index].confirmedState,
      !confirmed.history.isEmpty, let finger = devices[index].phase.finger,
      let queue = server.queue(finger.queueID), queue.user == devices[index].user
    else { return }
    var history = confirmed.history
    let reducer = VideoReducer()
    for envelope in queue.events where envelope.id > finger.lastEventID {
      guard case .payload(let event) = envelope.body else { continue }
      try? reducer.applyPartial(event, to: &history)
    }
    let user = devices[index].user
    let application = server.application
    let problems =
      PartialStateCheck.itemProblems(in: history) { application.history[$0] }
      + PartialStateCheck.intervalProblems(in: history) { try? application.fetch($0, for: user) }
    if let problem = problems.first {
      violations.append("device \(index) at \(finger): \(problem)")
    }
  }

  /// The videos whose recording was saved: the server tracks them, or a device still holds them to upload.
  var durableVideos: [VideoID: UserID] {
    var durable: [VideoID: UserID] = [:]
    for video in server.application.videos.values { durable[video.id] = video.recipient }
    for device in devices {
      for upload in device.extra.transfers.uploads { durable[upload.notice.video] = upload.notice.recipient }
      for entry in device.pendingMutations {
        if case .uploaded(let notice) = entry.mutation { durable[notice.video] = notice.recipient }
      }
    }
    return durable
  }

  /// The videos in the libraries of `user`'s devices: what the user can play.
  func libraryVideos(of user: UserID) -> Set<VideoID> {
    Set(devices.filter { $0.user == user }.flatMap { $0.extra.transfers.library.map(\.video.id) })
  }
}
