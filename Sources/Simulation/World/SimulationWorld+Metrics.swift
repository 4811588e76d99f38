import EventProtocol
import EventServer
import Foundation
import UpdateMachine

extension SimulationWorld {
  // MARK: - Invariants and metrics

  mutating func checkInvariants(_ index: Int) {
    // The device is read in place: a copy of it would retain every field, at every step.
    if devices[index].core.freshness(now: now).freshness == .live {
      guard case .polling = devices[index].phase, devices[index].reachedServer else {
        violations.append(
          "device \(index) says live in \(devices[index].phase) without having reached the server"
        )
        return
      }
    }
  }

  /// Finds the server version the device's confirmed state shows; records the staleness of each newly
  /// shown change. A confirmed state that was never a server snapshot means an event was skipped or
  /// applied twice.
  mutating func noteShownVersions(_ index: Int) {
    // The whole part is compared with the server's snapshots; what a domain holds in part (pages) it
    // checks itself.
    guard let state = devices[index].confirmedState else { return }
    let confirmed = Domain.wholePart(of: state)
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
      let previous = devices[index].lastFreshnessSample
      guard previous < time else { continue }
      devices[index].lastFreshnessSample = time
      // The interval's length, worked out only when something is counted over it (a closed app with no
      // wrong status under way counts nothing).
      var elapsedSeconds: Double { previous.duration(to: time).inSeconds }
      let shown =
        devices[index].appOpen
        ? devices[index].shownFreshnessIndex(now: now) : ShownFreshness.closed
      if devices[index].lastShownIndex != shown, devices[index].freshnessChanges.count < 2_000 {
        devices[index].lastShownIndex = shown
        devices[index].freshnessChanges.append(
          FreshnessChange(seconds: start.duration(to: now).inSeconds, state: ShownFreshness.names[shown])
        )
      }
      // When this interval began, worked out only when a wrong status starts or ends in it.
      var intervalStart: Timestamp { time.advanced(by: .seconds(-elapsedSeconds)) }
      guard devices[index].appOpen else {
        if devices[index].wrongSince != nil { endWrongStatus(index, at: intervalStart) }
        continue
      }
      let elapsed = elapsedSeconds
      devices[index].secondsByFreshness[shown] += elapsed
      devices[index].openSeconds += elapsed
      if devices[index].behindIsStale {
        devices[index].behindIsStale = false
        let server = versions[devices[index].user]!.last!.snapshot
        devices[index].isBehind = Domain.showsWrong(index, server: server, in: self)
      }
      if devices[index].online && devices[index].isBehind {
        devices[index].wrongStatusSeconds += elapsed
        if devices[index].wrongSince == nil {
          devices[index].wrongSince = intervalStart
          devices[index].wrongSinceOpening = devices[index].openedAt == intervalStart
        }
        let since = devices[index].wrongSince!
        devices[index].longestWrongStatus = max(devices[index].longestWrongStatus, since.duration(to: time).inSeconds)
      } else if devices[index].wrongSince != nil {
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

  /// What still keeps the world from having converged (empty once it has).
  var convergenceGaps: [String] {
    var gaps: [String] = []
    if let cluster, !cluster.isCaughtUp {
      gaps.append("a cluster node has not applied the whole log")
    }
    for device in devices {
      let whole = device.confirmedState.map(Domain.wholePart(of:))
      if whole != Domain.wholePart(of: server.application.snapshot(for: device.user)) {
        gaps.append("device \(device.index) (\(device.phase)) does not show its user's server state")
      }
      if device.core.hasOpenFetches {
        gaps.append("device \(device.index) has a fetch open")
      }
      if !device.pendingMutations.isEmpty {
        gaps.append("device \(device.index) has \(device.pendingMutations.count) writes pending")
      }
    }
    return gaps + Domain.convergenceGaps(in: self)
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
    let outcomes = Domain.outcomes(in: self)
    func perDeviceHour(_ value: (Device) -> Int) -> Double {
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
      pushesDelivered: devices.map(\.pushesDelivered).reduce(0, +),
      reregistrations: devices.map { max($0.registrations - 1, 0) }.reduce(0, +),
      freshnessShare: freshness,
      appOpens: devices.map(\.opens).reduce(0, +),
      recordings: devices.map(\.recordings).reduce(0, +),
      appKills: devices.map(\.kills).reduce(0, +),
      wakes: devices.map(\.wakes).reduce(0, +),
      videosSent: outcomes.made,
      videosDelivered: outcomes.completed,
      historyPagesMerged: pagesMerged,
      freshnessTimelines: devices.map(\.freshnessChanges),
      timeline: timeline,
      trace: trace
    )
  }
}
