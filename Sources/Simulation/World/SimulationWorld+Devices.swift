import EventProtocol
import EventServer
import Foundation
import UpdateMachine

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

  /// The engine of device `index` (signed in as `user`) at its launch number `epoch`, with jitter from the
  /// device's own stream.
  func makeCore(device index: Int, user: UserID, epoch: Int) -> Core {
    var engine = RandomStream.engine.generator(seed: scenario.seed, device: index, epoch: epoch)
    return Core(
      reducer: Domain.makeReducer(for: user, in: domain),
      configuration: engineConfiguration,
      lifecycle: .background,
      random: SeededRandomNumberGenerator(seed: engine.next())
    )
  }

  mutating func addDevice(for user: UserID) {
    let index = devices.count
    devices.append(
      SimulatedDevice(
        index: index,
        user: user,
        script: DeviceScript(device: index, scenario: scenario, start: start),
        seed: scenario.seed,
        core: makeCore(device: index, user: user, epoch: 0),
        extra: Domain.makeDeviceState(device: index, epoch: 0, scenario: scenario),
        now: now
      )
    )
    unshown.append([])
  }

  mutating func startDevice(_ index: Int) {
    perform(devices[index].core.loaded(nil, now: now), on: index)
    if scenario.strategy.usesPushes, let clientID = devices[index].clientID {
      // A short token and a handful of devices per user: within every bound.
      try! server.registerPushToken(
        PushToken(rawValue: "device-\(index)"),
        user: devices[index].user,
        clientID: clientID,
        now: now
      )
    }
  }

  /// Performs the engine's actions in order; with faults on, the app may be killed before any of them. An app
  /// the OS has not let run takes no step (an invariant: the world must route every input through a wake).
  mutating func perform(_ initial: [Core.Action], on index: Int) {
    if !initial.isEmpty, !devices[index].isRunning {
      violations.append(
        "[\(clockText(now))] device \(index) took a step while its app was not running (\(devices[index].process))"
      )
    }
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
        Domain.saved(index, in: &self)
        actions += devices[index].core.persistSucceeded(record, now: now)
      case .register(let request, _, _, _):
        devices[index].registrations += 1
        if devices[index].registrations > 1 {
          note("device \(index) re-registers (its queue expired or was lost): one snapshot download")
        }
        send(.register, as: request, from: index)
      case .poll(let request, let finger, let dontBlock, _):
        send(.poll(finger, dontBlock: dontBlock, limit: devices[index].core.pollBatchLimit), as: request, from: index)
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
    case .submit(_, let body, _): "sending \(body.requests.map(\.mutationID.description).joined(separator: ","))"
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
        let registration = try WireFormat.decode(Registration<Application.Snapshot>.self, from: bytes)
        devices[index].reachedServer = true
        actions = core.registerSucceeded(request, registration, now: now)
      } catch {
        actions = core.registerFailed(request, .api(error), now: now)
      }
    case (.poll, .body(let bytes)):
      do {
        let reply = try WireFormat.decode(EventsReply<Application.Event>.self, from: bytes)
        devices[index].reachedServer = true
        actions = core.pollSucceeded(request, reply.events, now: now)
        batchesApplied += 1
      } catch {
        actions = core.pollFailed(request, .api(error), now: now)
      }
    case (.submit, .body(let bytes)):
      do {
        actions = core.submitAnswered(
          request,
          try WireFormat.decode(MutationBatchReply.self, from: bytes).outcomes,
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
        let answer = try WireFormat.decode(FetchAnswer<Application.FetchedItem>.self, from: bytes)
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
    let epoch = devices[index].epoch
    perform(devices[index].core.timerFired(now: now), on: index)
    guard devices[index].epoch == epoch else { return }
    Domain.timerFired(index, in: &self)
  }

  /// A suspended app's timer does not fire: it stays due, and runs when the app next runs.
  mutating func deviceTimerFired(_ index: Int, generation: Int) {
    guard devices[index].timerGeneration == generation, devices[index].isRunning else { return }
    devices[index].timerAt = nil
    let epoch = devices[index].epoch
    perform(devices[index].core.timerFired(now: now), on: index)
    guard devices[index].epoch == epoch else { return }
    Domain.timerFired(index, in: &self)
  }

  /// After the engine moved: check invariants, let the domain follow the confirmed state, set the timer.
  mutating func engineChanged(_ index: Int) {
    devices[index].behindIsStale = true
    checkInvariants(index)
    noteShownVersions(index)
    Domain.engineChanged(index, in: &self)
    rescheduleTimer(index)
  }

  mutating func rescheduleTimer(_ index: Int) {
    let engineWakeUp = devices[index].nextWakeUp(after: now)
    let domainWakeUp = Domain.nextWakeUp(index, in: self)
    let next =
      switch (engineWakeUp, domainWakeUp) {
      case (let engine?, let domain?): min(engine, domain)
      case (let engine?, nil): engine
      case (nil, let domain?): domain
      case (nil, nil): Timestamp?.none
      }
    guard let next, next != devices[index].timerAt else { return }
    devices[index].timerAt = next
    devices[index].timerGeneration += 1
    events.push(.deviceTimer(device: index, generation: devices[index].timerGeneration), at: max(next, now))
  }
}
