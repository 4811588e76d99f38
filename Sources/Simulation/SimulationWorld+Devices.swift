import EventProtocol
import EventServer
import Foundation
import UpdateMachine
import UpdateMachineTesting
import VideoMessaging

extension SimulationWorld {
  // MARK: - Devices and their engines

  /// The engine configuration a device runs with under the scenario's strategy.
  var engineConfiguration: UpdateMachineConfiguration {
    var configuration = UpdateMachineConfiguration()
    configuration.queueLifespan = scenario.queueLifespan
    if let seconds = scenario.requestDeadlineSeconds {
      configuration.registerTimeout = .seconds(seconds)
      configuration.shortPollTimeout = .seconds(seconds)
      configuration.submitTimeout = .seconds(seconds)
    }
    configuration.backgroundPollInterval = scenario.strategy == .pushOnly ? nil : .seconds(15 * 60)
    return configuration
  }

  /// Whether the strategy lets the engine follow the app's lifecycle (long-poll in the foreground); the
  /// others keep it in the background and poll on their own schedule.
  var followsLifecycle: Bool { scenario.strategy == .pushPlusPoll || scenario.strategy == .pushPlusPollPayload }

  /// The engine of device `index`'s launch number `epoch`, with jitter from the device's own stream.
  func makeCore(device index: Int, epoch: Int) -> Core {
    var engine = RandomStream.engine.generator(seed: scenario.seed, device: index, epoch: epoch)
    return Core(
      reducer: VideoReducer(),
      configuration: engineConfiguration,
      lifecycle: .background,
      random: SeededRandomNumberGenerator(seed: engine.next())
    )
  }

  /// A fresh transfer queue for device `index`'s launch number `epoch`.
  func makeTransferQueue(device index: Int, epoch: Int) -> TransferQueue {
    var engine = RandomStream.engine.generator(seed: scenario.seed, device: index, epoch: epoch)
    _ = engine.next()
    return TransferQueue(seed: engine.next())
  }

  mutating func addDevice(for user: UserID) {
    let index = devices.count
    devices.append(
      SimulatedDevice(
        index: index,
        user: user,
        script: DeviceScript(device: index, scenario: scenario, start: start),
        seed: scenario.seed,
        core: makeCore(device: index, epoch: 0),
        transfers: makeTransferQueue(device: index, epoch: 0),
        now: now
      )
    )
    unshown.append([])
  }

  mutating func startDevice(_ index: Int) {
    perform(devices[index].core.loaded(nil, now: now), on: index)
    if scenario.strategy.usesPushes, let clientID = devices[index].core.clientID {
      // A short token and a handful of devices per user: within every bound.
      try! server.registerPushToken(
        PushToken(rawValue: "device-\(index)"),
        user: devices[index].user,
        clientID: clientID,
        now: now
      )
    }
  }

  /// Performs the engine's actions in order; with faults on, the app may be killed before any of them.
  mutating func perform(_ initial: [Core.Action], on index: Int) {
    let epoch = devices[index].epoch
    var actions = initial
    var position = 0
    while position < actions.count, devices[index].epoch == epoch {
      let action = actions[position]
      position += 1
      if faultsOn && devices[index].killArmed {
        note("device \(index) is killed between two steps, before \(describe(action))")
        crash(index)
        return
      }
      switch action {
      case .persist(let record, _):
        devices[index].disk = record
        devices[index].diskTransfers = devices[index].savedTransfers
        actions += devices[index].core.persistSucceeded(record, now: now)
      case .register(let request, _, _, _):
        devices[index].registrations += 1
        if devices[index].registrations > 1 {
          note("device \(index) re-registers (its queue expired or was lost): one snapshot download")
        }
        send(.register, as: request, from: index)
      case .poll(let request, let finger, let dontBlock, _):
        send(.poll(finger, dontBlock: dontBlock), as: request, from: index)
      case .submit(let request, let body, _):
        send(.submit(body), as: request, from: index)
      case .fetch(let request, let body, let queueID, _):
        send(.fetch(body, queueID), as: request, from: index)
      case .fetchFinished(let request, let outcome):
        traceLine("device \(index) fetch \(request) ends: \(outcome)")
        if case .merged = outcome { pagesMerged += 1 }
      case .cancel(let request):
        devices[index].outstanding[request] = nil
        if let pollID = devices[index].parked.removeValue(forKey: request) { cancelParkedPoll(pollID) }
      }
    }
    if devices[index].epoch == epoch { engineChanged(index) }
  }

  func describe(_ action: Core.Action) -> String {
    switch action {
    case .persist: "a save"
    case .register: "a register"
    case .poll: "a poll"
    case .submit(_, let body, _): "sending \(body.mutationID)"
    case .cancel: "a cancellation"
    case .fetch(_, let request, _, _): "a fetch of \(request)"
    case .fetchFinished: "a fetch's end"
    }
  }

  mutating func answerReachesDevice(_ index: Int, _ request: RequestID, _ answer: Answer) {
    guard let exchange = devices[index].outstanding.removeValue(forKey: request) else { return }
    devices[index].parked[request] = nil
    var core = devices[index].core
    let actions: [Core.Action]
    switch (exchange, answer) {
    case (.register, .body(let bytes)):
      do {
        let registration = try WireFormat.decode(Registration<VideoSnapshot>.self, from: Data(bytes))
        devices[index].reachedServer = true
        actions = core.registerSucceeded(request, registration, now: now)
      } catch {
        actions = core.registerFailed(request, .api(error), now: now)
      }
    case (.poll, .body(let bytes)):
      do {
        let reply = try WireFormat.decode(EventsReply<VideoEvent>.self, from: Data(bytes))
        devices[index].reachedServer = true
        actions = core.pollSucceeded(request, reply.events, now: now)
      } catch {
        actions = core.pollFailed(request, .api(error), now: now)
      }
    case (.submit, .body(let bytes)):
      do {
        actions = core.submitSucceeded(
          request,
          try WireFormat.decode(MutationReceipt.self, from: Data(bytes)),
          now: now
        )
      } catch {
        actions = core.submitFailed(request, .api(error), now: now)
      }
    case (.register, .failure(let error)):
      devices[index].reachedServer = false
      actions = core.registerFailed(request, error, now: now)
    case (.poll, .failure(let error)):
      devices[index].reachedServer = false
      actions = core.pollFailed(request, error, now: now)
    case (.submit, .failure(let error)):
      actions = core.submitFailed(request, error, now: now)
    case (.fetch, .body(let bytes)):
      do {
        let answer = try WireFormat.decode(FetchAnswer<VideoHistoryItem>.self, from: Data(bytes))
        actions = core.fetchSucceeded(request, answer, now: now)
      } catch {
        actions = core.fetchFailed(request, .api(error), now: now)
      }
    case (.fetch, .failure(let error)):
      actions = core.fetchFailed(request, error, now: now)
    }
    devices[index].core = core
    perform(actions, on: index)
  }

  /// Runs a device timer that is due now or earlier before the next input (its happening is then stale).
  mutating func fireDueTimer(_ index: Int) {
    guard devices[index].isRunning, let due = devices[index].timerAt, due <= now else { return }
    devices[index].timerGeneration += 1
    devices[index].timerAt = nil
    perform(devices[index].core.timerFired(now: now), on: index)
    performTransfers(devices[index].transfers.timerFired(now: now), on: index)
  }

  /// A suspended app's timer does not fire: it stays due, and runs when the app next runs.
  mutating func deviceTimerFired(_ index: Int, generation: Int) {
    guard devices[index].timerGeneration == generation, devices[index].isRunning else { return }
    devices[index].timerAt = nil
    perform(devices[index].core.timerFired(now: now), on: index)
    performTransfers(devices[index].transfers.timerFired(now: now), on: index)
  }

  /// After the engine moved: check invariants, follow the confirmed state, set the timer.
  mutating func engineChanged(_ index: Int) {
    devices[index].behindIsStale = true
    checkInvariants(index)
    noteShownVersions(index)
    if let state = devices[index].core.confirmedState {
      performTransfers(
        devices[index].transfers.confirmed(
          state,
          isConfirmedThisSession: devices[index].core.isConfirmedThisSession,
          now: now
        ),
        on: index
      )
    }
    rescheduleTimer(index)
  }

  mutating func rescheduleTimer(_ index: Int) {
    let candidates = [devices[index].core.nextWakeUp(after: now), devices[index].transfers.nextRetryAt].compactMap {
      $0
    }
    guard let next = candidates.min(), next != devices[index].timerAt else { return }
    devices[index].timerAt = next
    devices[index].timerGeneration += 1
    events.push(.deviceTimer(device: index, generation: devices[index].timerGeneration), at: max(next, now))
  }

  // MARK: - Transfers

  mutating func performTransfers(_ actions: [TransferQueue.Action], on index: Int) {
    let epoch = devices[index].epoch
    for action in actions where devices[index].epoch == epoch {
      switch action {
      case .download(let video, _):
        if devices[index].core.confirmedState?.incoming.contains(where: { $0.id == video.id }) != true {
          violations.append("device \(index) started downloading \(video.id), which its confirmed state does not list")
        }
        if let resumed = resumedFrom[index], resumed.video == video.id {
          note("device \(index) resumes the download it was killed in, from byte \(resumed.bytes) of \(video.size)")
          resumedFrom[index] = nil
        }
        traceLine("device \(index) starts downloading \(video.id)")
        devices[index].transferGeneration += 1
        devices[index].download = .init(video: video.id, generation: devices[index].transferGeneration)
        schedule(
          .transferStep(device: index, download: true, generation: devices[index].transferGeneration),
          after: latency(device: index)
        )
      case .cancelDownload:
        devices[index].download = nil
      case .upload(let notice, _):
        devices[index].transferGeneration += 1
        devices[index].upload = .init(video: notice.video, generation: devices[index].transferGeneration)
        schedule(
          .transferStep(device: index, download: false, generation: devices[index].transferGeneration),
          after: latency(device: index)
        )
      case .deliver(let delivered):
        traceLine("device \(index) delivers \(delivered.video.id)")
        if devices[index].appOpen {
          schedule(
            .watch(device: index, video: delivered.video.id),
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
        devices[index].files[key] = nil
      case .submit(let command):
        let (_, engineActions) = devices[index].core.submit(command, now: now)
        perform(engineActions, on: index)
      case .save:
        devices[index].saves += 1
        devices[index].savedTransfers = devices[index].transfers
        let token = withUnsafeBytes(of: devices[index].saves) { Data($0) }
        perform(devices[index].core.deviceDataChanged(token, now: now), on: index)
      }
    }
    rescheduleTimer(index)
  }

  static let chunkBytes = 256 << 10

  /// One step of a transfer: a chunk moves (or fails, or moves short) after the network's time for it.
  mutating func transferStep(_ index: Int, download isDownload: Bool, generation: Int) {
    let active = isDownload ? devices[index].download : devices[index].upload
    guard let active, active.generation == generation else { return }
    let failed = !devices[index].online || (faultsOn && chance(faults.blobFailure, device: index))
    var chunk = Self.chunkBytes
    if faultsOn && chance(faults.blobTruncation, device: index) { chunk /= 3 }
    if isDownload {
      guard let item = devices[index].transfers.downloads.first(where: { $0.video.id == active.video }) else { return }
      let key = TransferQueue.localKey(for: item.video.id)
      guard blobs[item.video.blobKey] != nil || devices[index].files[key]?.complete == true else {
        devices[index].download = nil
        wakeForTransfer(index)
        performTransfers(
          devices[index].transfers.downloadFailed(item.video.id, .gone(item.video.blobKey), now: now),
          on: index
        )
        return
      }
      if failed {
        devices[index].download = nil
        wakeForTransfer(index)
        performTransfers(
          devices[index].transfers.downloadFailed(item.video.id, .unavailable("network"), now: now),
          on: index
        )
        checkRetryWaitGrows(index, "d:\(item.video.id)")
        return
      }
      devices[index].failuresInARow["d:\(item.video.id)"] = nil
      var file = devices[index].files[key] ?? .init(bytes: 0, complete: false)
      file.bytes = min(item.video.size, file.bytes + chunk)
      file.complete = file.bytes == item.video.size
      devices[index].files[key] = file
      devices[index].contentBytes += chunk
      if file.complete {
        devices[index].download = nil
        wakeForTransfer(index)
        performTransfers(devices[index].transfers.downloadFinished(item.video.id, now: now), on: index)
      } else {
        devices[index].transfers.downloadProgressed(item.video.id, bytesDone: file.bytes)
        schedule(
          .transferStep(device: index, download: true, generation: generation),
          after: transferTime(chunk, device: index)
        )
      }
    } else {
      guard let item = devices[index].transfers.uploads.first(where: { $0.notice.video == active.video }) else {
        return
      }
      if failed {
        devices[index].upload = nil
        wakeForTransfer(index)
        performTransfers(devices[index].transfers.uploadFailed(item.notice.video, now: now), on: index)
        checkRetryWaitGrows(index, "u:\(item.notice.video)")
        return
      }
      devices[index].failuresInARow["u:\(item.notice.video)"] = nil
      let key = item.notice.blobKey
      if blobs[key] == nil {
        blobPartials[key] = min(item.notice.size, (blobPartials[key] ?? 0) + chunk)
        devices[index].contentBytes += chunk
        if blobPartials[key] == item.notice.size {
          blobPartials[key] = nil
          blobs[key] = item.notice.size
        }
      }
      if blobs[key] != nil {
        devices[index].upload = nil
        wakeForTransfer(index)
        performTransfers(devices[index].transfers.uploadFinished(item.notice.video, now: now), on: index)
      } else {
        devices[index].transfers.uploadProgressed(item.notice.video, bytesDone: blobPartials[key] ?? 0)
        schedule(
          .transferStep(device: index, download: false, generation: generation),
          after: transferTime(chunk, device: index)
        )
      }
    }
  }

  /// A chunk's time on a 2 MB/s link, plus latency.
  mutating func transferTime(_ bytes: Int, device index: Int) -> Duration {
    latency(device: index) + .milliseconds(Int64(bytes / 2_000))
  }
}
