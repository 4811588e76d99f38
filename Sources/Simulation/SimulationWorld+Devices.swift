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
    configuration.backgroundPollInterval = scenario.strategy == .pushOnly ? nil : .seconds(15 * 60)
    return configuration
  }

  /// Whether the strategy lets the engine follow the app's lifecycle (long-poll in the foreground); the
  /// others keep it in the background and poll on their own schedule.
  var followsLifecycle: Bool { scenario.strategy == .pushPlusPoll || scenario.strategy == .pushPlusPollPayload }

  mutating func makeCore(lifecycle: AppLifecycle) -> Core {
    Core(
      reducer: VideoReducer(),
      configuration: engineConfiguration,
      lifecycle: lifecycle,
      random: SeededRandomNumberGenerator(seed: random.next())
    )
  }

  mutating func addDevice(for user: UserID) {
    let index = devices.count
    let core = makeCore(lifecycle: .background)
    devices.append(
      SimulatedDevice(index: index, user: user, core: core, transfers: TransferQueue(seed: random.next()), now: now)
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
      if faultsOn && chance(0.002) {
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
        if let pollID = devices[index].parked.removeValue(forKey: request) {
          parkedPolls[pollID] = nil
          applyServer(server.pollCancelled(pollID, now: now))
        }
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
    guard let due = devices[index].timerAt, due <= now else { return }
    devices[index].timerGeneration += 1
    devices[index].timerAt = nil
    perform(devices[index].core.timerFired(now: now), on: index)
    performTransfers(devices[index].transfers.timerFired(now: now), on: index)
  }

  mutating func deviceTimerFired(_ index: Int, generation: Int) {
    guard devices[index].timerGeneration == generation else { return }
    devices[index].timerAt = nil
    perform(devices[index].core.timerFired(now: now), on: index)
    performTransfers(devices[index].transfers.timerFired(now: now), on: index)
  }

  mutating func pushReachesDevice(_ index: Int, _ payload: [UInt8]) {
    guard let decoded = try? JSONDecoder().decode(PushPayload<VideoEvent>.self, from: Data(payload)) else { return }
    var hint = Core.PushHint(decoded)
    if scenario.strategy != .pushPlusPollPayload { hint.events = nil }
    traceLine("push reaches device \(index)")
    perform(devices[index].core.pushReceived(hint, now: now), on: index)
  }

  /// After the engine moved: check invariants, follow the confirmed state, set the timer.
  mutating func engineChanged(_ index: Int) {
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
          after: latency()
        )
      case .cancelDownload:
        devices[index].download = nil
      case .upload(let notice, _):
        devices[index].transferGeneration += 1
        devices[index].upload = .init(video: notice.video, generation: devices[index].transferGeneration)
        schedule(
          .transferStep(device: index, download: false, generation: devices[index].transferGeneration),
          after: latency()
        )
      case .deliver(let delivered):
        traceLine("device \(index) delivers \(delivered.video.id)")
        if devices[index].appOpen {
          schedule(
            .watch(device: index, video: delivered.video.id),
            after: seconds(scenario.behaviour.watchAfterSeconds)
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
    let failed = !devices[index].online || (faultsOn && chance(faults.blobFailure))
    var chunk = Self.chunkBytes
    if faultsOn && chance(faults.blobTruncation) { chunk /= 3 }
    if isDownload {
      guard let item = devices[index].transfers.downloads.first(where: { $0.video.id == active.video }) else { return }
      let key = TransferQueue.localKey(for: item.video.id)
      guard blobs[item.video.blobKey] != nil || devices[index].files[key]?.complete == true else {
        devices[index].download = nil
        performTransfers(
          devices[index].transfers.downloadFailed(item.video.id, .gone(item.video.blobKey), now: now),
          on: index
        )
        return
      }
      if failed {
        devices[index].download = nil
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
      devices[index].bytes += chunk
      if file.complete {
        devices[index].download = nil
        performTransfers(devices[index].transfers.downloadFinished(item.video.id, now: now), on: index)
      } else {
        devices[index].transfers.downloadProgressed(item.video.id, bytesDone: file.bytes)
        schedule(.transferStep(device: index, download: true, generation: generation), after: transferTime(chunk))
      }
    } else {
      guard let item = devices[index].transfers.uploads.first(where: { $0.notice.video == active.video }) else {
        return
      }
      if failed {
        devices[index].upload = nil
        performTransfers(devices[index].transfers.uploadFailed(item.notice.video, now: now), on: index)
        checkRetryWaitGrows(index, "u:\(item.notice.video)")
        return
      }
      devices[index].failuresInARow["u:\(item.notice.video)"] = nil
      let key = item.notice.blobKey
      if blobs[key] == nil {
        blobPartials[key] = min(item.notice.size, (blobPartials[key] ?? 0) + chunk)
        devices[index].bytes += chunk
        if blobPartials[key] == item.notice.size {
          blobPartials[key] = nil
          blobs[key] = item.notice.size
        }
      }
      if blobs[key] != nil {
        devices[index].upload = nil
        performTransfers(devices[index].transfers.uploadFinished(item.notice.video, now: now), on: index)
      } else {
        devices[index].transfers.uploadProgressed(item.notice.video, bytesDone: blobPartials[key] ?? 0)
        schedule(.transferStep(device: index, download: false, generation: generation), after: transferTime(chunk))
      }
    }
  }

  /// A chunk's time on a 2 MB/s link, plus latency.
  mutating func transferTime(_ bytes: Int) -> Duration {
    latency() + .milliseconds(Int64(bytes / 2_000))
  }

  // MARK: - What users do

  mutating func scheduleNextOpen(_ index: Int) {
    guard faultsOn else { return }
    schedule(.appOpens(device: index), after: exponential(perHour: scenario.behaviour.opensPerHour))
  }

  mutating func appOpens(_ index: Int) {
    guard !devices[index].appOpen else { return }
    devices[index].appOpen = true
    traceLine("device \(index): the app opens")
    if followsLifecycle {
      perform(devices[index].core.enteredForeground(now: now), on: index)
    } else {
      perform(devices[index].core.pushReceived(.init(), now: now), on: index)
      if scenario.strategy == .pollOnly { schedule(.pollTick(device: index), after: .seconds(60)) }
    }
    for video in devices[index].transfers.library where !video.viewed {
      schedule(.watch(device: index, video: video.video.id), after: seconds(scenario.behaviour.watchAfterSeconds))
    }
    browseHistory(index)
    guard faultsOn else { return }
    schedule(.appCloses(device: index), after: seconds(scenario.behaviour.openSeconds))
    let rate = scenario.behaviour.recordingsPerOpenHour
    schedule(.record(device: index), after: exponential(perHour: rate))
  }

  mutating func appCloses(_ index: Int) {
    guard devices[index].appOpen, faultsOn else { return }
    devices[index].appOpen = false
    traceLine("device \(index): the app closes")
    if followsLifecycle { perform(devices[index].core.enteredBackground(now: now), on: index) }
    scheduleNextOpen(index)
  }

  mutating func pollTick(_ index: Int) {
    guard devices[index].appOpen, scenario.strategy == .pollOnly else { return }
    perform(devices[index].core.pushReceived(.init(), now: now), on: index)
    schedule(.pollTick(device: index), after: .seconds(60))
  }

  mutating func record(_ index: Int) {
    guard devices[index].appOpen, faultsOn, devices[index].core.isLoaded else { return }
    let user = devices[index].user
    let friends = users.filter { $0 != user }
    let recipient = friends.randomElement(using: &random) ?? user
    let video = VideoID.make(at: now, using: &random)
    let size = Int.random(in: scenario.behaviour.videoKilobytes, using: &random) * 1000
    let localKey = BlobKey(rawValue: "outgoing/\(video.rawValue)")
    devices[index].files[localKey] = .init(bytes: size, complete: true)
    traceLine("device \(index) records \(video) for \(recipient)")
    let notice = VideoUpload(video: video, recipient: recipient, blobKey: .forVideo(video), size: size)
    performTransfers(devices[index].transfers.recorded(notice, localKey: localKey, now: now), on: index)
    schedule(.record(device: index), after: exponential(perHour: scenario.behaviour.recordingsPerOpenHour))
  }

  mutating func watch(_ index: Int, _ video: VideoID) {
    guard devices[index].appOpen else { return }
    performTransfers(devices[index].transfers.viewed(video), on: index)
  }

  mutating func goesOffline(_ index: Int) {
    guard faultsOn, devices[index].online else { return }
    devices[index].online = false
    devices[index].reachedServer = false
    traceLine("device \(index) goes offline")
    perform(devices[index].core.networkLost(now: now), on: index)
    schedule(.comesOnline(device: index), after: seconds(faults.offlineSeconds))
  }

  mutating func comesOnline(_ index: Int) {
    guard !devices[index].online else { return }
    devices[index].online = true
    traceLine("device \(index) comes back online")
    perform(devices[index].core.networkBecameAvailable(now: now), on: index)
    if faultsOn { schedule(.goesOffline(device: index), after: exponential(perHour: faults.offlinePerHour)) }
  }

  /// The app is killed: everything in memory is lost; it restarts from its persisted record and files.
  mutating func crash(_ index: Int) {
    for (request, _) in devices[index].outstanding {
      if let pollID = devices[index].parked[request] {
        parkedPolls[pollID] = nil
        applyServer(server.pollCancelled(pollID, now: now))
      }
    }
    if let download = devices[index].download {
      let bytes = devices[index].files[TransferQueue.localKey(for: download.video)]?.bytes ?? 0
      if bytes > 0 {
        note("device \(index) is killed mid-download of \(download.video.rawValue.prefix(13))… at byte \(bytes)")
        resumedFrom[index] = (download.video, bytes)
      }
    }
    devices[index].epoch += 1
    devices[index].outstanding = [:]
    devices[index].parked = [:]
    devices[index].download = nil
    devices[index].upload = nil
    devices[index].appOpen = false
    devices[index].reachedServer = false
    devices[index].timerAt = nil
    devices[index].timerGeneration += 1
    devices[index].core = makeCore(lifecycle: .background)
    var record: PersistedRecord<VideoSnapshot, VideoCommand>?
    var recovery: [StoreRecovery] = []
    if let disk = devices[index].disk, let bytes = try? disk.encoded() {
      let restoration = PersistedRecord<VideoSnapshot, VideoCommand>.restore(from: bytes, for: VideoReducer())
      record = restoration.record
      recovery = restoration.notes
    }
    // The saved queue goes through its real bytes, as it would from the record's device data.
    let savedQueue = devices[index].diskTransfers.flatMap { try? JSONEncoder().encode($0) }
    devices[index].transfers =
      savedQueue.flatMap { try? JSONDecoder().decode(TransferQueue.self, from: $0) }
      ?? TransferQueue(seed: random.next())
    devices[index].savedTransfers = devices[index].diskTransfers
    // The failures in a row carry over as saved (progress since the last save is not saved).
    devices[index].failuresInARow = [:]
    for download in devices[index].transfers.downloads where download.failures > 0 {
      devices[index].failuresInARow["d:\(download.video.id)"] = download.failures
    }
    for upload in devices[index].transfers.uploads where upload.failures > 0 {
      devices[index].failuresInARow["u:\(upload.notice.video)"] = upload.failures
    }
    devices[index].shownVersion = 0
    traceLine("device \(index) restarts from its record")
    perform(devices[index].core.loaded(record, recovery: recovery, now: now), on: index)
    performTransfers(devices[index].transfers.restarted(now: now), on: index)
    scheduleNextOpen(index)
  }

  /// The faults stop: every device comes online and its user opens the app (again); the world must now
  /// converge.
  mutating func stopFaults() {
    faultsOn = false
    faults = .none
    note("--- the faults stop; every app opens ---")
    for index in devices.indices {
      comesOnline(index)
      if devices[index].appOpen {
        // The user opens the app again: under push-only and poll-only that is what makes a device poll.
        devices[index].appOpen = false
        if followsLifecycle { perform(devices[index].core.enteredBackground(now: now), on: index) }
      }
      appOpens(index)
    }
    schedule(.convergenceCheck, after: .seconds(1))
  }

  /// The user looks at a conversation's history: the newest page, then older ones from the oldest video
  /// known. Draws come from a generator of their own, so turning browsing on changes no other draw's
  /// stream but the network's.
  mutating func browseHistory(_ index: Int) {
    let pages = scenario.behaviour.historyPagesPerOpen
    guard pages > 0 else { return }
    let user = devices[index].user
    let friend = users[Int.random(in: users.indices, using: &browsing)]
    let narrow = VideoHistory.conversation(between: user, and: friend)
    var requests = [FetchRequest(narrow: narrow, anchor: .newest, before: 4, after: 0)]
    if pages > 1, let state = devices[index].core.confirmedState {
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

  // MARK: - Invariants and metrics

  /// Retry waits grow: the n-th failed step in a row of a transfer waits up to 2^(n-1) s (jittered, capped
  /// at 5 minutes), so the queue's attempt count must be n, whatever retries started in between.
  mutating func checkRetryWaitGrows(_ index: Int, _ transfer: String) {
    let seen = devices[index].failuresInARow[transfer, default: 0] + 1
    devices[index].failuresInARow[transfer] = seen
    let isDownload = transfer.hasPrefix("d:")
    let video = VideoID(rawValue: String(transfer.dropFirst(2)))
    let state: (attempts: Int, retryAt: Timestamp)? =
      if isDownload {
        devices[index].transfers.downloads.first { $0.video.id == video }.flatMap {
          if case .failed(let attempts, let retryAt) = $0.state { (attempts, retryAt) } else { nil }
        }
      } else {
        devices[index].transfers.uploads.first { $0.notice.video == video }.flatMap {
          if case .failed(let attempts, let retryAt) = $0.state { (attempts, retryAt) } else { nil }
        }
      }
    guard let state else {
      // The failure did not leave the transfer waiting (it moved on, or started again at once): follow
      // the queue's own count from here.
      devices[index].failuresInARow[transfer] =
        isDownload
        ? devices[index].transfers.downloads.first { $0.video.id == video }?.failures
        : devices[index].transfers.uploads.first { $0.notice.video == video }?.failures
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

  mutating func checkInvariants(_ index: Int) {
    let device = devices[index]
    if device.core.freshness(now: now).freshness == .live {
      guard case .polling = device.core.phase, device.reachedServer else {
        violations.append("device \(index) says live in \(device.core.phase) without having reached the server")
        return
      }
    }
    checkHistory(index)
    guard let shown = device.core.displayedState else { return }
    for video in shown.outgoing {
      if let before = devices[index].shownStatuses[video.id], video.status < before {
        violations.append("device \(index) showed \(video.id) as \(before), then \(video.status)")
      }
      devices[index].shownStatuses[video.id] = max(devices[index].shownStatuses[video.id] ?? video.status, video.status)
    }
  }

  /// No known history item differs from the server's at the device's finger: the device's history, with
  /// the events still queued after its finger applied, must claim only what the server holds now.
  mutating func checkHistory(_ index: Int) {
    guard scenario.behaviour.historyPagesPerOpen > 0, let confirmed = devices[index].core.confirmedState,
      !confirmed.history.isEmpty, let finger = devices[index].core.phase.finger,
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

  /// Finds the server version the device's confirmed state shows; records the staleness of each newly
  /// shown change. A confirmed state that was never a server snapshot means an event was skipped or
  /// applied twice.
  mutating func noteShownVersions(_ index: Int) {
    // The whole part is compared with the server's snapshots; the history held in part is checked by
    // ``checkHistory(_:)``.
    guard var confirmed = devices[index].core.confirmedState else { return }
    confirmed.history = PartialState()
    let history = versions[devices[index].user]!
    guard history[devices[index].shownVersion].snapshot != confirmed else { return }
    guard let version = history.indices.reversed().first(where: { history[$0].snapshot == confirmed }) else {
      violations.append("device \(index) holds a state the server never had: an event skipped or applied twice")
      return
    }
    guard version > devices[index].shownVersion else {
      devices[index].shownVersion = version
      return
    }
    devices[index].shownVersion = version
    while let first = unshown[index].first, first.version <= version {
      unshown[index].removeFirst()
      let staleness = first.time.duration(to: now).inSeconds
      if first.open { foregroundStaleness.append(staleness) } else { backgroundStaleness.append(staleness) }
    }
    if let since = lostPushSince.removeValue(forKey: index) {
      note(
        "device \(index) missed a push; a poll caught it up \(Percentiles.format(since.duration(to: now).inSeconds)) later"
      )
    }
  }

  /// Accumulates time-weighted figures from the last sample to `time`: freshness states, open time, and
  /// time a sender looked at a status the server had moved past.
  mutating func sample(until time: Timestamp) {
    for index in devices.indices {
      let elapsed = devices[index].lastFreshnessSample.duration(to: time).inSeconds
      guard elapsed > 0 else { continue }
      devices[index].lastFreshnessSample = time
      let shownState =
        devices[index].appOpen ? SimulatedDevice.name(devices[index].core.freshness(now: now).freshness) : "closed"
      if devices[index].freshnessChanges.last?.state != shownState, devices[index].freshnessChanges.count < 2_000 {
        devices[index].freshnessChanges.append(
          FreshnessChange(seconds: start.duration(to: now).inSeconds, state: shownState)
        )
      }
      guard devices[index].appOpen else {
        devices[index].wrongSince = nil
        continue
      }
      let name = shownState
      devices[index].freshnessSeconds[name, default: 0] += elapsed
      devices[index].openSeconds += elapsed
      let server = versions[devices[index].user]!.last!.snapshot
      let shown = devices[index].core.displayedState?.outgoing ?? []
      let behind =
        devices[index].online
        && shown.contains { video in
          server.outgoing.first { $0.id == video.id }.map { $0.status > video.status && video.status != .sending }
            ?? false
        }
      if behind {
        devices[index].wrongStatusSeconds += elapsed
        let since = devices[index].wrongSince ?? time.advanced(by: .seconds(-elapsed))
        devices[index].wrongSince = since
        devices[index].longestWrongStatus = max(devices[index].longestWrongStatus, since.duration(to: time).inSeconds)
      } else {
        devices[index].wrongSince = nil
      }
    }
  }

  var isConverged: Bool { convergenceGaps.isEmpty }

  /// The videos whose recording was saved: the server tracks them, or a device still holds them to upload.
  var durableVideos: [VideoID: UserID] {
    var durable: [VideoID: UserID] = [:]
    for video in server.application.videos.values { durable[video.id] = video.recipient }
    for device in devices {
      for upload in device.transfers.uploads { durable[upload.notice.video] = upload.notice.recipient }
      for entry in device.core.pendingMutations {
        if case .uploaded(let notice) = entry.mutation { durable[notice.video] = notice.recipient }
      }
    }
    return durable
  }

  /// The videos in the libraries of `user`'s devices: what the user can play.
  func libraryVideos(of user: UserID) -> Set<VideoID> {
    Set(devices.filter { $0.user == user }.flatMap { $0.transfers.library.map(\.video.id) })
  }

  /// What still keeps the world from having converged (empty once it has).
  var convergenceGaps: [String] {
    var gaps: [String] = []
    for device in devices {
      // The whole part equals the server's snapshot; the history held in part claims only what the server
      // holds (``checkHistory(_:)`` at every step; here at the end, with nothing left in flight).
      var whole = device.core.confirmedState
      whole?.history = PartialState()
      if whole != server.application.snapshot(for: device.user) {
        gaps.append("device \(device.index) (\(device.core.phase)) does not show its user's server state")
      }
      if device.core.hasOpenFetches {
        gaps.append("device \(device.index) has a fetch open")
      }
      if let history = device.core.confirmedState?.history, !history.isEmpty {
        let user = device.user
        let application = server.application
        let problems = PartialStateCheck.problems(in: history) { try? application.fetch($0, for: user) }
        if let problem = problems.first { gaps.append("device \(device.index): \(problem)") }
      }
      if !device.core.pendingMutations.isEmpty {
        gaps.append("device \(device.index) has \(device.core.pendingMutations.count) writes pending")
      }
      if !device.transfers.downloads.isEmpty || !device.transfers.uploads.isEmpty {
        gaps.append(
          "device \(device.index) has \(device.transfers.downloads.count) downloads and \(device.transfers.uploads.count) uploads left"
        )
      }
    }
    let undelivered = durableVideos.filter { !libraryVideos(of: $0.value).contains($0.key) }.map(\.key)
    if !undelivered.isEmpty {
      let names = undelivered.sorted().prefix(3).map { "\($0) to \(durableVideos[$0]!)" }.joined(separator: ", ")
      gaps.append("\(undelivered.count) videos not delivered to their recipient (\(names))")
    }
    return gaps
  }

  func report() -> SimulationReport {
    let deviceHours = Double(devices.count) * scenario.duration.inSeconds / 3600
    let openHours = devices.map(\.openSeconds).reduce(0, +) / 3600
    var freshness: [String: Double] = [:]
    // Summed in a fixed order: a dictionary's order varies between runs, and so would the rounding.
    let total = devices.flatMap { $0.freshnessSeconds.sorted { $0.key < $1.key }.map(\.value) }.reduce(0, +)
    for device in devices {
      for (name, seconds) in device.freshnessSeconds { freshness[name, default: 0] += seconds / max(total, 1) }
    }
    return SimulationReport(
      scenario: scenario,
      converged: settledAt != nil && violations.isEmpty,
      convergenceGaps: settledAt == nil ? convergenceGaps : [],
      settleTime: settledAt.map { start.advanced(by: scenario.duration).duration(to: $0) },
      violations: violations,
      deviceHours: deviceHours,
      foregroundStaleness: Percentiles(foregroundStaleness),
      backgroundStaleness: Percentiles(backgroundStaleness),
      wrongStatusSecondsPerOpenHour: openHours > 0 ? devices.map(\.wrongStatusSeconds).reduce(0, +) / openHours : 0,
      longestWrongStatusSeconds: devices.map(\.longestWrongStatus).max() ?? 0,
      requestsPerDeviceHour: Double(devices.map(\.requests).reduce(0, +)) / deviceHours,
      bytesPerDeviceHour: Double(devices.map(\.bytes).reduce(0, +)) / deviceHours,
      pushesSent: pushesSent,
      pushesLost: devices.map(\.pushesLost).reduce(0, +),
      pushesRedundant: devices.map { $0.core.metrics.pushHintsLate + $0.core.metrics.pushHintsRedundant }.reduce(0, +),
      pushesAppliedWithoutRequest: devices.map(\.core.metrics.pushesApplied).reduce(0, +),
      reregistrations: devices.map { max($0.registrations - 1, 0) }.reduce(0, +),
      freshnessShare: freshness,
      videosSent: durableVideos.count,
      videosDelivered: durableVideos.filter { libraryVideos(of: $0.value).contains($0.key) }.count,
      historyPagesMerged: pagesMerged,
      freshnessTimelines: devices.map(\.freshnessChanges),
      timeline: timeline,
      trace: trace
    )
  }
}
