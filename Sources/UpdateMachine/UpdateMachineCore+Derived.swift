import EventProtocol

/// Pure functions of the core's state: freshness, the next wake-up, the record to persist, failure classes.
extension UpdateMachineCore {
  /// Freshness for the UI at `now`. ``Freshness/live`` only when the server has answered since the last
  /// disconnection.
  public func freshness(now: Timestamp) -> FreshnessReport {
    if case .stopped(let reason, _) = phase {
      return FreshnessReport(
        freshness: .cannotConnect(since: failure?.since ?? disconnectedSince ?? now, reason: reason.description),
        dataAsOf: dataAsOf
      )
    }
    if case .polling = phase, disconnectedSince == nil, failure == nil {
      return FreshnessReport(freshness: .live, dataAsOf: now)
    }
    let since = disconnectedSince ?? now
    if let failure, failure.count >= configuration.failuresBeforeCannotConnect {
      return FreshnessReport(
        freshness: .cannotConnect(since: failure.since, reason: failure.reason),
        dataAsOf: dataAsOf
      )
    }
    if since.duration(to: now) < configuration.freshnessDebounce {
      return FreshnessReport(freshness: .settling, dataAsOf: dataAsOf)
    }
    return FreshnessReport(freshness: .connecting(since: since), dataAsOf: dataAsOf)
  }

  /// Whether the confirmed state came from the server during this session: a register or a poll has
  /// succeeded since the machine loaded, and its queue has not been lost since (a lost queue means the
  /// state may be arbitrarily old until the next register). Work that must never start from stale
  /// persisted state (such as downloading an episode that may have been finished elsewhere) waits for it.
  public var isConfirmedThisSession: Bool { reachedServerThisSession && phase.finger != nil }

  /// The next time after `now` at which ``timerFired(now:)`` has work (a retry, a background poll, a
  /// request deadline, an outbox retry, a save retry, the end of the freshness debounce), or `nil`.
  public func nextWakeUp(after now: Timestamp) -> Timestamp? {
    guard isLoaded else { return nil }
    if case .stopped = phase { return nil }
    var times: [Timestamp] = []
    if let inFlight {
      times.append(inFlight.deadline)
    } else {
      switch phase {
      case .registerFailed(_, let retryAt), .pollFailed(_, _, let retryAt): times.append(retryAt)
      case .idle(_, let nextPollAt?): times.append(nextPollAt)
      default: break
      }
    }
    if let outboxTime = outbox?.nextWakeUp { times.append(outboxTime) }
    if let fetchDeadline = fetches.nextDeadline { times.append(fetchDeadline) }
    if let fetchRetry = fetches.nextRetry { times.append(fetchRetry) }
    if case .failing(_, _, let retryAt) = saving { times.append(retryAt) }
    if let disconnectedSince { times.append(disconnectedSince.advanced(by: configuration.freshnessDebounce)) }
    return times.filter { $0 > now }.min()
  }

  /// The record to persist now.
  public func persistedRecord() -> PersistedRecord<State, Mutation> {
    PersistedRecord(
      clientID: outbox!.clientID,
      stateVersion: reducer.stateVersion,
      state: confirmedState!,
      finger: phase.heldFinger,
      lastContactAt: lastContactAt,
      dataAsOf: dataAsOf,
      queueLifetime: queueLifetime,
      longPollTimeout: longPollTimeout,
      outbox: outbox!.entries,
      rejected: outbox!.rejected,
      nextMutationID: outbox!.nextMutationID,
      deviceData: deviceData
    )
  }

  /// How a transport error counts: its failure kind and the server's `retry-after`, clamped to
  /// ``UpdateMachineConfiguration/maximumRetryAfter``.
  public func classify(_ error: TransportError) -> (kind: FailureKind, retryAfter: Duration?) {
    switch error.kind {
    case .connectionFailed, .timedOut, .cancelled: (.connection, nil)
    case .serverError: (.server, nil)
    case .api(let apiError) where apiError.code == .rateLimitHit:
      (.rateLimited, apiError.retryAfter.map { $0.clamped(to: .zero...configuration.maximumRetryAfter) })
    case .api: (.protocolError, nil)
    }
  }
}
