import EventProtocol
import EventServer
import Foundation
import JSONCoding
import UpdateMachine

extension SimulationWorld {
  // MARK: - The script

  /// Puts device `index`'s script on the clock: sessions, recordings, outages, kills, the OS's moments.
  mutating func scheduleScript(of index: Int) {
    let script = devices[index].script
    for (number, session) in script.sessions.enumerated() {
      events.push(.appOpens(device: index, session: number), at: session.opens)
      events.push(.appCloses(device: index, session: number), at: session.closes)
    }
    for (number, recording) in script.recordings.enumerated() {
      events.push(.record(device: index, recording: number), at: recording.at)
    }
    for outage in script.outages { events.push(.goesOffline(device: index, until: outage.until), at: outage.from) }
    for moment in script.kills { events.push(.crash(device: index), at: moment) }
    for moment in script.killsBetweenSteps { events.push(.armKill(device: index), at: moment) }
    if usesBackgroundRefresh {
      for moment in script.refreshSlots { events.push(.backgroundRefresh(device: index), at: moment) }
    }
    for moment in script.terminations { events.push(.systemTerminates(device: index), at: moment) }
    leftScreen(index)
  }

  /// Whether the strategy asks the OS for background time (push-only learns from pushes and opens alone).
  var usesBackgroundRefresh: Bool { scenario.strategy != .pushOnly && scenario.platform.suspends }

  // MARK: - What users do

  mutating func appOpens(_ index: Int, session: Int) {
    guard faultsOn, !devices[index].appOpen, now < devices[index].script.sessions[session].closes else { return }
    devices[index].session = session
    open(index)
  }

  /// The app comes on screen: launched if it was not running, told it is in the foreground.
  mutating func open(_ index: Int) {
    devices[index].forceQuit = false
    let epoch = devices[index].epoch
    if devices[index].process == .terminated { launch(index) } else { resumeProcess(index) }
    // Killed while starting: ``crash(_:)`` has its user open it again a few seconds later.
    guard devices[index].epoch == epoch else { return }
    devices[index].appOpen = true
    devices[index].runsUntil = nil
    devices[index].opens += 1
    devices[index].openedAt = now
    traceLine("device \(index): the app opens")
    if followsLifecycle {
      perform(devices[index].core.enteredForeground(now: now), on: index)
    } else {
      perform(devices[index].core.pushReceived(.init(), now: now), on: index)
      if scenario.strategy == .pollOnly {
        schedule(.pollTick(device: index), after: .seconds(scenario.foregroundPollSeconds))
      }
    }
    // A push the OS held while throttling is delivered when the user launches the app.
    if let held = devices[index].pushHeldByOS, devices[index].epoch == epoch {
      devices[index].pushHeldByOS = nil
      deliverPush(index, held)
    }
    // Each step may have killed the app (its user then opens it again): the next runs only if not.
    guard devices[index].epoch == epoch else { return }
    Domain.appOpened(index, in: &self)
  }

  mutating func appCloses(_ index: Int, session: Int) {
    guard faultsOn, devices[index].appOpen, devices[index].session == session else { return }
    devices[index].appOpen = false
    devices[index].session = nil
    traceLine("device \(index): the app closes")
    if followsLifecycle { perform(devices[index].core.enteredBackground(now: now), on: index) }
    if devices[index].script.sessions[session].forceQuits, scenario.platform.suspends {
      note("device \(index): the user force-quits the app (no push reaches it until it is opened)")
      kill(index)
      devices[index].forceQuit = true
      devices[index].pushHeldByOS = nil
      return
    }
    leftScreen(index)
  }

  /// The app left the screen (or started there): it runs on until the OS suspends it.
  mutating func leftScreen(_ index: Int) {
    guard let seconds = scenario.platform.backgroundRunSeconds else { return }
    keepRunning(index, for: seconds)
  }

  mutating func pollTick(_ index: Int) {
    guard devices[index].appOpen, scenario.strategy == .pollOnly else { return }
    perform(devices[index].core.pushReceived(.init(), now: now), on: index)
    schedule(.pollTick(device: index), after: .seconds(scenario.foregroundPollSeconds))
  }

  /// The user acts, at a moment the script gives, if the app is on screen.
  mutating func userActs(_ index: Int, _ number: Int) {
    guard devices[index].appOpen, faultsOn, devices[index].isLoaded else { return }
    devices[index].recordings += 1
    Domain.userActs(index, devices[index].script.recordings[number], in: &self)
  }

  // MARK: - The network

  mutating func goesOffline(_ index: Int, until: Timestamp) {
    guard faultsOn, devices[index].online else { return }
    devices[index].online = false
    devices[index].reachedServer = false
    traceLine("device \(index) goes offline")
    tellNetwork(index)
    events.push(.comesOnline(device: index), at: until)
  }

  mutating func comesOnline(_ index: Int) {
    guard !devices[index].online else { return }
    devices[index].online = true
    traceLine("device \(index) comes back online")
    tellNetwork(index)
    // The push service delivers what it held for the device.
    let held = devices[index].pushesHeldByService
    devices[index].pushesHeldByService = []
    for payload in held {
      schedule(.pushReachesDevice(device: index, payload: payload), after: latency(device: index))
    }
  }

  /// Tells a running app (its engine, and the domain's machinery) the network's state when it has not
  /// heard it yet: at the change, or when it runs again after missing it.
  mutating func tellNetwork(_ index: Int) {
    let online = devices[index].online
    guard devices[index].isRunning, devices[index].toldOffline == online else { return }
    devices[index].toldOffline = !online
    let epoch = devices[index].epoch
    if online {
      perform(devices[index].core.networkBecameAvailable(now: now), on: index)
    } else {
      perform(devices[index].core.networkLost(now: now), on: index)
    }
    guard devices[index].epoch == epoch else { return }
    Domain.networkChanged(index, online: online, in: &self)
  }

  // MARK: - The OS

  /// The OS suspends the app: its timers stop and its connections freeze (the requests under way fail when
  /// it runs again). Transfers go on (a background session's).
  mutating func suspend(_ index: Int, generation: Int) {
    guard devices[index].suspensionGeneration == generation, !devices[index].appOpen,
      devices[index].process == .running, let until = devices[index].runsUntil, until <= now
    else { return }
    devices[index].process = .suspended
    devices[index].runsUntil = nil
    traceLine("device \(index): suspended by the OS")
    for (request, exchange) in devices[index].outstanding.sorted(by: { $0.key < $1.key }) {
      if let pollID = devices[index].parked.removeValue(forKey: request) {
        cancelParkedPoll(pollID)
      }
      devices[index].droppedAtSuspension.append((request, exchange))
    }
    devices[index].outstanding = [:]
  }

  /// Lets the app run at least `seconds` more from now (launching or resuming it), then be suspended.
  mutating func keepRunning(_ index: Int, for seconds: Int) {
    guard !devices[index].appOpen else { return }
    let until = now.advanced(by: .seconds(seconds))
    if let current = devices[index].runsUntil, current >= until { return }
    devices[index].runsUntil = until
    devices[index].suspensionGeneration += 1
    events.push(.suspend(device: index, generation: devices[index].suspensionGeneration), at: until)
  }

  /// The OS wakes the closed app for a push, a refresh or a finished transfer: launched if it was
  /// terminated, resumed if suspended, for the profile's wake time. A force-quit app is not woken.
  /// - Returns: Whether the app runs now.
  @discardableResult
  mutating func wake(_ index: Int) -> Bool {
    guard !devices[index].appOpen else { return true }
    guard scenario.platform.suspends else { return devices[index].process == .running }
    guard !devices[index].forceQuit else { return false }
    devices[index].wakes += 1
    if devices[index].process == .terminated {
      launch(index)
    } else if devices[index].process == .suspended {
      resumeProcess(index)
    }
    // Killed while starting: the wake is over.
    guard devices[index].process == .running else { return false }
    keepRunning(index, for: scenario.platform.wakeSeconds)
    return true
  }

  /// A transfer the OS carried on while the app was suspended ended: the app is woken to hear of it.
  /// - Returns: Whether the app runs now (a kill while it resumed ends it).
  @discardableResult
  mutating func wakeForTransfer(_ index: Int) -> Bool {
    guard devices[index].process == .suspended else { return devices[index].isRunning }
    return wake(index)
  }

  /// A suspended app runs again: the requests frozen at suspension fail (the connection was lost), and the
  /// timers that came due fire.
  mutating func resumeProcess(_ index: Int) {
    guard devices[index].process == .suspended else { return }
    devices[index].process = .running
    let dropped = devices[index].droppedAtSuspension
    devices[index].droppedAtSuspension = []
    let lost = TransportError.connectionFailed("suspended")
    var core = devices[index].core
    var actions: [Core.Action] = []
    for (request, exchange) in dropped {
      switch exchange {
      case .register: actions += core.registerFailed(request, lost, now: now)
      case .poll: actions += core.pollFailed(request, lost, now: now)
      case .submit: actions += core.submitFailed(request, lost, now: now)
      case .fetch: actions += core.fetchFailed(request, lost, now: now)
      }
    }
    devices[index].core = core
    perform(actions, on: index)
    tellNetwork(index)
    if let due = devices[index].timerAt, due <= now {
      devices[index].timerGeneration += 1
      events.push(.deviceTimer(device: index, generation: devices[index].timerGeneration), at: now)
    }
  }

  /// The OS offers background time: a closed app the strategy lets poll checks for changes.
  mutating func backgroundRefresh(_ index: Int) {
    guard faultsOn, !devices[index].appOpen, wake(index) else { return }
    traceLine("device \(index): background refresh")
    perform(devices[index].core.pushReceived(.init(), now: now), on: index)
  }

  /// The OS reclaims a suspended app's memory.
  mutating func systemTerminates(_ index: Int) {
    guard faultsOn, scenario.platform.suspends, !devices[index].appOpen, devices[index].process == .suspended
    else { return }
    traceLine("device \(index): terminated by the OS")
    kill(index)
  }

  // MARK: - Pushes on the device

  /// A push reaches the phone: held by the push service while the device is offline, dropped for a
  /// force-quit app, held by the OS (the newest only) while a background app is over its budget, else it
  /// wakes the app and reaches the engine.
  mutating func pushReachesDevice(_ index: Int, _ payload: [UInt8]) {
    guard devices[index].online else {
      if scenario.platform.pushServiceKeepsNewestOnly {
        devices[index].pushesHeldByService = [payload]
      } else {
        devices[index].pushesHeldByService.append(payload)
      }
      return
    }
    guard !devices[index].appOpen else { return deliverPush(index, payload) }
    if scenario.platform.suspends && devices[index].forceQuit {
      devices[index].pushesDiscarded += 1
      return
    }
    if let perHour = scenario.platform.silentPushesPerHour, devices[index].process != .running {
      refillPushBudget(index, perHour: perHour)
      guard devices[index].pushBudget >= 1 else {
        devices[index].pushesThrottled += 1
        let wasHolding = devices[index].pushHeldByOS != nil
        devices[index].pushHeldByOS = payload
        if !wasHolding {
          let wait = (1 - devices[index].pushBudget) / perHour * 3600
          schedule(.heldPushReleased(device: index), after: .milliseconds(Int64(wait * 1000) + 1))
        }
        return
      }
      devices[index].pushBudget -= 1
    }
    guard wake(index) else { return }
    deliverPush(index, payload)
  }

  /// The OS's budget allows the push it held.
  mutating func releaseHeldPush(_ index: Int) {
    guard let held = devices[index].pushHeldByOS else { return }
    devices[index].pushHeldByOS = nil
    pushReachesDevice(index, held)
  }

  mutating func refillPushBudget(_ index: Int, perHour: Double) {
    let elapsed = devices[index].pushBudgetAt.duration(to: now).inSeconds
    devices[index].pushBudgetAt = now
    devices[index].pushBudget = min(perHour, devices[index].pushBudget + elapsed / 3600 * perHour)
  }

  mutating func deliverPush(_ index: Int, _ payload: [UInt8]) {
    guard let decoded = try? WireJSON.decode(PushPayload<Application.Event>.self, from: payload) else {
      return
    }
    var hint = Core.PushHint(decoded)
    if scenario.strategy != .pushPlusPollPayload { hint.events = nil }
    traceLine("push reaches device \(index)")
    devices[index].pushesDelivered += 1
    perform(devices[index].core.pushReceived(hint, now: now), on: index)
  }

  // MARK: - Kills and launches

  /// The app is killed (a crash, a kill between two steps): if its user was looking at it (or opening it),
  /// they open it again a few seconds later; else it waits for the OS to launch it (a desktop app is
  /// launched at once).
  mutating func crash(_ index: Int) {
    devices[index].kills += 1
    kill(index)
    // On screen or opening: the user is in a session.
    if let session = devices[index].session {
      devices[index].session = nil
      let reopen = now.advanced(by: .seconds(3))
      if reopen < devices[index].script.sessions[session].closes {
        events.push(.appOpens(device: index, session: session), at: reopen)
      }
    } else if !scenario.platform.suspends {
      launch(index)
    }
  }

  /// Everything in memory is lost: requests, transfers under way, the engine. The process is gone.
  mutating func kill(_ index: Int) {
    for (request, _) in devices[index].outstanding {
      if let pollID = devices[index].parked[request] { cancelParkedPoll(pollID) }
    }
    Domain.killing(index, in: &self)
    devices[index].epoch += 1
    devices[index].killArmed = false
    devices[index].outstanding = [:]
    devices[index].parked = [:]
    devices[index].droppedAtSuspension = []
    devices[index].appOpen = false
    devices[index].reachedServer = false
    devices[index].timerAt = nil
    devices[index].timerGeneration += 1
    devices[index].runsUntil = nil
    devices[index].process = .terminated
    devices[index].behindIsStale = true
  }

  /// The process starts from the persisted record and what the domain saved beside it (in the background;
  /// opening the app follows).
  mutating func launch(_ index: Int) {
    devices[index].process = .running
    devices[index].behindIsStale = true
    let epoch = devices[index].epoch
    let user = devices[index].user
    devices[index].core = makeCore(device: index, user: user, epoch: epoch)
    var record: PersistedRecord<Application.Snapshot, Application.Command>?
    var recovery: [StoreRecovery] = []
    if let disk = devices[index].disk, let bytes = try? disk.encoded() {
      let reducer = Domain.makeReducer(for: user, in: domain)
      let restoration = PersistedRecord<Application.Snapshot, Application.Command>.restore(from: bytes, for: reducer)
      record = restoration.record
      recovery = restoration.notes
    }
    Domain.launching(index, in: &self)
    devices[index].shownVersion = 0
    traceLine("device \(index) starts from its record")
    perform(devices[index].core.loaded(record, recovery: recovery, now: now), on: index)
    // Killed while starting: nothing more runs.
    guard devices[index].epoch == epoch else { return }
    // A new process assumes a network until its path monitor says otherwise.
    devices[index].toldOffline = false
    tellNetwork(index)
    Domain.launched(index, in: &self)
  }

  /// The server forgets a long-poll whose client went away.
  mutating func cancelParkedPoll(_ pollID: PollID) {
    guard let (_, _, since) = parkedPolls.removeValue(forKey: pollID) else { return }
    parkedPollSeconds += since.duration(to: now).inSeconds
    // On the node it is parked on.
    if let node = cluster?.pollNode.removeValue(forKey: pollID) { serveNode(node) }
    applyServer(server.pollCancelled(pollID, now: now))
  }

  // MARK: - The end of the faults

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
      devices[index].session = nil
      open(index)
    }
    schedule(.convergenceCheck, after: .seconds(1))
  }
}
