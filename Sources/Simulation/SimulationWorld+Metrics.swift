import EventProtocol
import EventServer
import Foundation
import UpdateMachine
import UpdateMachineTesting
import VideoMessaging

extension SimulationWorld {
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
    // The device is read in place: a copy of it would retain every field, at every step.
    if devices[index].core.freshness(now: now).freshness == .live {
      guard case .polling = devices[index].core.phase, devices[index].reachedServer else {
        violations.append(
          "device \(index) says live in \(devices[index].core.phase) without having reached the server"
        )
        return
      }
    }
    checkHistory(index)
    guard let shown = devices[index].core.displayedState else { return }
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
      let intervalStart = time.advanced(by: .seconds(-elapsed))
      guard devices[index].appOpen else {
        endWrongStatus(index, at: intervalStart)
        continue
      }
      let name = shownState
      devices[index].freshnessSeconds[name, default: 0] += elapsed
      devices[index].openSeconds += elapsed
      if devices[index].behindIsStale {
        devices[index].behindIsStale = false
        let server = versions[devices[index].user]!.last!.snapshot
        let shown = devices[index].core.displayedState?.outgoing ?? []
        devices[index].isBehind = shown.contains { video in
          server.outgoing.first { $0.id == video.id }.map { $0.status > video.status && video.status != .sending }
            ?? false
        }
      }
      if devices[index].online && devices[index].isBehind {
        devices[index].wrongStatusSeconds += elapsed
        if devices[index].wrongSince == nil {
          devices[index].wrongSince = intervalStart
          devices[index].wrongSinceOpening = devices[index].openedAt == intervalStart
        }
        let since = devices[index].wrongSince!
        devices[index].longestWrongStatus = max(devices[index].longestWrongStatus, since.duration(to: time).inSeconds)
      } else {
        endWrongStatus(index, at: intervalStart)
      }
    }
  }

  /// A wrong status stopped showing at `end` (corrected, or the app closed): its time on screen is counted
  /// by how it began, when it began before the faults stopped (the settling phase opens every app at once).
  mutating func endWrongStatus(_ index: Int, at end: Timestamp) {
    guard let since = devices[index].wrongSince else { return }
    devices[index].wrongSince = nil
    guard since < start.advanced(by: scenario.duration) else { return }
    let seconds = since.duration(to: end).inSeconds
    if seconds >= 10 {
      let how = devices[index].wrongSinceOpening ? "from the moment the app opened" : "while its user looked"
      timeline.append(
        "[\(clockText(end))] device \(index) showed a sender a wrong status for \(Percentiles.format(seconds)) \(how)"
      )
    }
    if devices[index].wrongSinceOpening {
      wrongAfterOpening.append(seconds)
    } else {
      wrongWhileOpen.append(seconds)
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
    func perDeviceHour(_ value: (SimulatedDevice) -> Int) -> Double {
      Double(devices.map(value).reduce(0, +)) / deviceHours
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
      wrongStatusWhileOpen: Percentiles(wrongWhileOpen),
      wrongStatusAfterOpening: Percentiles(wrongAfterOpening),
      samples: ExperienceSamples(
        wrongWhileOpen: wrongWhileOpen,
        wrongAfterOpening: wrongAfterOpening,
        closedStaleness: backgroundStaleness
      ),
      wrongStatusSecondsPerOpenHour: openHours > 0 ? devices.map(\.wrongStatusSeconds).reduce(0, +) / openHours : 0,
      longestWrongStatusSeconds: devices.map(\.longestWrongStatus).max() ?? 0,
      openShare: openHours / deviceHours,
      requestsPerDeviceHour: perDeviceHour(\.requests),
      bytesPerDeviceHour: perDeviceHour(\.bytes),
      contentBytesPerDeviceHour: perDeviceHour(\.contentBytes),
      serverRequestsPerDeviceHour: Double(requestsServed) / deviceHours,
      parkedPollSecondsPerDeviceHour: parkedPollSeconds / deviceHours,
      pushesSentPerDeviceHour: Double(pushesSent) / deviceHours,
      pushesSent: pushesSent,
      pushesLost: devices.map(\.pushesLost).reduce(0, +),
      pushesRedundant: devices.map { $0.core.metrics.pushHintsLate + $0.core.metrics.pushHintsRedundant }.reduce(0, +),
      pushesAppliedWithoutRequest: devices.map(\.core.metrics.pushesApplied).reduce(0, +),
      pushesThrottled: devices.map(\.pushesThrottled).reduce(0, +),
      pushesDiscarded: devices.map(\.pushesDiscarded).reduce(0, +),
      reregistrations: devices.map { max($0.registrations - 1, 0) }.reduce(0, +),
      freshnessShare: freshness,
      appOpens: devices.map(\.opens).reduce(0, +),
      recordings: devices.map(\.recordings).reduce(0, +),
      appKills: devices.map(\.kills).reduce(0, +),
      wakes: devices.map(\.wakes).reduce(0, +),
      videosSent: durableVideos.count,
      videosDelivered: durableVideos.filter { libraryVideos(of: $0.value).contains($0.key) }.count,
      historyPagesMerged: pagesMerged,
      freshnessTimelines: devices.map(\.freshnessChanges),
      timeline: timeline,
      trace: trace
    )
  }
}
