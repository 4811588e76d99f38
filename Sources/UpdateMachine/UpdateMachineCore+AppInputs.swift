import EventProtocol
import Foundation

/// What the app tells the core: writes, timers, the lifecycle, the network, credentials and pushes.
extension UpdateMachineCore {
  /// The app submits a mutation. It shows at once (optimistically) and is sent once a save holding it
  /// succeeds.
  /// - Returns: The mutation's id and the actions.
  public mutating func submit(_ mutation: Mutation, now: Timestamp) -> (MutationID, [Action]) {
    let (ids, actions) = submit(contentsOf: CollectionOfOne(mutation), now: now)
    return (ids[0], actions)
  }

  /// The app submits several mutations at once, in order: each shows at once, exactly as if submitted one
  /// after another by ``submit(_:now:)``, and one save holds them all (one journal append and one fsync
  /// instead of one each), after which they are sent.
  /// - Returns: The mutations' ids, in order, and the actions; no action when `mutations` is empty.
  public mutating func submit(contentsOf mutations: some Sequence<Mutation>, now: Timestamp) -> ([MutationID], [Action])
  {
    precondition(isLoaded, "submit before the persisted data was loaded")
    let reducer = reducer
    let ids = mutations.map { mutation in
      outbox!.append(mutation, now: now) { reducer.replaces(mutation, unsent: $0) }
    }
    guard !ids.isEmpty else { return ([], []) }
    return (ids, [persistAction()] + proceed(now: now))
  }

  /// The store could not be taken (``PersistenceError/inUse(_:)``): the machine stops before loading
  /// anything, so it never reads, sends or saves.
  public mutating func storeUnavailable(_ detail: String, now: Timestamp) -> [Action] {
    guard !isLoaded else { return [] }
    disconnectedSince = now
    phase = .stopped(.storeInUse(detail), finger: nil)
    return []
  }

  /// The store could not be opened for a reason other than another user of it (a lock file the folder
  /// cannot hold): a write failure, shown as ``persistenceIssue``; the machine loads nothing until the app
  /// calls `resume()`, which tries again.
  public mutating func storeOpenFailed(_ error: PersistenceError, now: Timestamp) -> [Action] {
    guard !isLoaded else { return [] }
    disconnectedSince = disconnectedSince ?? now
    saving = .failing(error, failures: 1, retryAt: now)
    return []
  }

  /// The app's device-local data changed: it is saved with the rest of the record, atomically.
  public mutating func deviceDataChanged(_ data: Data, now: Timestamp) -> [Action] {
    guard isLoaded, data != deviceData else { return [] }
    deviceData = data
    return [persistAction()]
  }

  /// The app has shown the refused mutations up to `id` to the user: forget them.
  public mutating func rejectionsDismissed(through id: MutationID, now: Timestamp) -> [Action] {
    outbox?.dismissRejections(through: id) == true ? [persistAction()] : []
  }

  /// A timer the shell set for ``nextWakeUp(after:)`` went off: retries, background polls, a save retry,
  /// and requests whose deadline passed (cancelled and counted as timeouts).
  public mutating func timerFired(now: Timestamp) -> [Action] {
    guard isLoaded else { return [] }
    var actions: [Action] = []
    if case .failing(_, _, let retryAt) = saving, retryAt <= now { actions.append(persistAction()) }
    if let inFlight, inFlight.deadline <= now {
      actions.append(.cancel(inFlight.request))
      switch inFlight {
      case .register(let request, _): actions += registerFailed(request, .timedOut, now: now)
      case .poll(let request, _, _): actions += pollFailed(request, .timedOut, now: now)
      }
    }
    if let request = outbox?.timedOutRequest(now: now) {
      actions.append(.cancel(request))
      actions += submitFailed(request, .timedOut, now: now)
    }
    actions += fetchesTimedOut(now: now)
    return actions + proceed(now: now)
  }

  /// The app went to the background: the long-poll stops; the machine polls every background interval.
  public mutating func enteredBackground(now: Timestamp) -> [Action] {
    guard lifecycle == .foreground else { return [] }
    lifecycle = .background
    disconnectedSince = disconnectedSince ?? now
    var actions: [Action] = []
    if case .polling(let finger) = phase {
      if case .poll(let request, _, _) = inFlight {
        actions.append(.cancel(request))
        inFlight = nil
      }
      phase = .idle(finger, nextPollAt: configuration.backgroundPollInterval.map(now.advanced(by:)))
    }
    return actions + proceed(now: now)
  }

  /// The app came to the foreground: poll again at once. A wait caused by connection failures is cut short
  /// and its backoff reset; a wait caused by 5xx or a rate limit is kept.
  public mutating func enteredForeground(now: Timestamp) -> [Action] {
    guard lifecycle == .background else { return [] }
    lifecycle = .foreground
    if case .idle(let finger, _) = phase { phase = .polling(finger) }
    return retryConnectionFailuresNow(now: now)
  }

  /// The platform reports a usable network path again: like coming to the foreground for connection
  /// failures, the wait is cut short and the backoff reset (the outbox's too). A request sent before this
  /// report whose failure to connect arrives after it goes again at once.
  public mutating func networkBecameAvailable(now: Timestamp) -> [Action] {
    networkReportedLost = false
    networkReturns &+= 1
    return retryConnectionFailuresNow(now: now)
  }

  /// The platform reports that the network is gone: the register or poll under way is cancelled and
  /// counted as a connection failure at once (instead of waiting for its deadline), so freshness says so.
  /// Until the network is reported back (or a push arrives, or a request succeeds), failed requests are
  /// retried only every ``UpdateMachineConfiguration/offlineProbeInterval``, in case the report was wrong.
  public mutating func networkLost(now: Timestamp) -> [Action] {
    guard isLoaded else { return [] }
    networkReportedLost = true
    var actions: [Action] = []
    let lost = TransportError.connectionFailed("network lost")
    switch inFlight {
    case .register(let request, _): actions += [.cancel(request)] + registerFailed(request, lost, now: now)
    case .poll(let request, _, _): actions += [.cancel(request)] + pollFailed(request, lost, now: now)
    case nil: disconnectedSince = disconnectedSince ?? now
    }
    if let request = outbox?.requestInFlight {
      actions += [.cancel(request)] + submitFailed(request, lost, now: now)
    }
    return actions
  }

  /// After ``Phase/stopped(_:finger:)``: the app refreshed the credentials; start again with the kept state,
  /// finger and outbox.
  public mutating func resume(now: Timestamp) -> [Action] {
    guard case .stopped(let reason, let finger) = phase, isLoaded else { return [] }
    if case .storeInUse = reason { return [] }
    failure = nil
    disconnectedSince = disconnectedSince ?? now
    if let finger {
      phase = lifecycle == .foreground ? .polling(finger) : .idle(finger, nextPollAt: now)
    } else {
      phase = .stale
    }
    return proceed(now: now)
  }

  /// A push notification hinted that something changed. A hint naming an event already applied does
  /// nothing. A push carrying the events that continue the finger exactly is applied with no request (the
  /// acknowledgement rides on the next poll). Otherwise the machine polls at once without blocking (or
  /// registers, or retries, now).
  public mutating func pushReceived(_ hint: PushHint, now: Timestamp) -> [Action] {
    metrics.pushHints += 1
    // A push came through: the network is back, whatever the platform said last.
    if networkReportedLost {
      networkReportedLost = false
      outbox?.retryNow()
    }
    if let applied = applyPushedEvents(hint, now: now) { return applied }
    if let eventID = hint.lastEventID, let finger = phase.finger,
      hint.queueID == nil || hint.queueID == finger.queueID, eventID <= finger.lastEventID
    {
      metrics.pushHintsLate += 1
      return []
    }
    switch phase {
    case .polling(let finger):
      switch inFlight {
      case .poll(let request, longPoll: true, _):
        inFlight = nil
        return [.cancel(request)] + startPoll(finger, dontBlock: true, now: now)
      case .poll(_, longPoll: false, _):
        deferPush(hint)
        return []
      case .register:
        metrics.pushHintsRedundant += 1
        return []
      case nil:
        return proceed(now: now)
      }
    case .idle(let finger, _):
      if case .poll(_, longPoll: false, _) = inFlight {
        deferPush(hint)
        return []
      }
      phase = .idle(finger, nextPollAt: now)
    case .pollFailed(let finger, let attempt, _):
      phase = .pollFailed(finger, attempt: attempt, retryAt: now)
    case .registerFailed(let attempt, _):
      phase = .registerFailed(attempt: attempt, retryAt: now)
    case .registering:
      metrics.pushHintsRedundant += 1
      return []
    case .stale, .stopped:
      break
    }
    return proceed(now: now)
  }

  /// Applies the events a push carried when they continue the finger exactly (the next id after the
  /// finger through the hint's latest id, with no gap); `nil` when they do not, or fail to apply.
  private mutating func applyPushedEvents(_ hint: PushHint, now: Timestamp) -> [Action]? {
    guard let events = hint.events, let finger = phase.finger, hint.queueID == finger.queueID,
      let latest = hint.lastEventID, latest > finger.lastEventID
    else { return nil }
    let fresh = events.filter { $0.id > finger.lastEventID }
    let contiguous = zip(fresh, fresh.dropFirst()).allSatisfy { $1.id == $0.id + 1 }
    guard contiguous, fresh.first?.id == finger.lastEventID + 1, fresh.last?.id == latest,
      case .success(let batch) = applyBatch(fresh, after: finger)
    else { return nil }
    adopt(batch)
    let pages = mergeReadyPages(finger: batch.lastEventID)
    metrics.pushesApplied += 1
    dataAsOf = now
    let advanced = EventFinger(queueID: finger.queueID, lastEventID: batch.lastEventID)
    switch phase {
    case .polling: phase = .polling(advanced)
    case .pollFailed(_, let attempt, let retryAt): phase = .pollFailed(advanced, attempt: attempt, retryAt: retryAt)
    case .idle(_, let nextPollAt): phase = .idle(advanced, nextPollAt: nextPollAt)
    case .stale, .registering, .registerFailed, .stopped: return nil
    }
    outbox?.confirm(by: advanced)
    return [persistAction()] + pages.actions + proceed(now: now)
  }

  /// A push arrived while a non-blocking poll was under way. That poll may have been answered before the
  /// pushed event existed, so the push is remembered: if the poll's answer does not reach the event, the
  /// machine polls once more at once (``pollSucceeded(_:_:now:)``).
  private mutating func deferPush(_ hint: PushHint) {
    let latest = hint.lastEventID ?? Int.max
    deferredPushEventID = max(deferredPushEventID ?? latest, latest)
  }
}
