import EventProtocol

/// Fetching pages of partial state and composing them with the event stream (see ``FetchTracker``).
extension UpdateMachineCore {
  /// The composer of fetched pages, when the reducer is a ``PartialUpdateReducer``.
  static func partialComposer(
    of reducer: some UpdateReducer<State, Event, Mutation>
  ) -> (any PartialReducing<State, Event>)? {
    guard let partial = reducer as? any PartialUpdateReducer else { return nil }
    return composer(partial)
  }

  private static func composer<P: PartialUpdateReducer>(_ reducer: P) -> (any PartialReducing<State, Event>)? {
    PartialComposer<P>(reducer: reducer) as? any PartialReducing<State, Event>
  }

  /// Whether a fetch is waiting for a queue, under way, or held until the finger reaches its page.
  public var hasOpenFetches: Bool { !fetches.waiting.isEmpty || fetches.isTracking }

  /// The app asks for a page of a narrow. It is sent against the current queue (or once there is one),
  /// and answered by a `.fetchFinished` action once merged, or failed.
  ///
  /// A machine whose reducer is not a ``PartialUpdateReducer`` answers at once with a failure.
  public mutating func fetch(_ request: FetchRequest, now: Timestamp) -> (RequestID, [Action]) {
    let id = newRequestID()
    guard partial != nil, isLoaded else {
      let reason = isLoaded ? "the reducer holds no partial state" : "the machine has not loaded"
      return (id, [.fetchFinished(id, .failed(.api(.badRequest(reason))))])
    }
    if let problem = request.problem {
      return (id, [.fetchFinished(id, .failed(.api(.badRequest(problem))))])
    }
    if case .stopped(let reason, _) = phase {
      return (id, [.fetchFinished(id, .failed(.api(.badRequest("the machine stopped: \(reason)"))))])
    }
    partial!.markUsed(request.narrow, in: &confirmedState!)
    // The same page asked for again while the first is under way: one fetch, one identity.
    if let existing = fetches.outstanding(request) { return (existing, []) }
    fetches.waiting.append(.init(id: id, request: request, notOn: nil))
    return (id, proceedFetches(now: now))
  }

  /// The app no longer wants fetch `id` (the user scrolled away): it ends as cancelled, and an answer that
  /// comes later is dropped. Identical requests share one fetch, so this cancels it for every caller.
  public mutating func cancelFetch(_ id: RequestID) -> [Action] {
    let finished: [Action] = [.fetchFinished(id, .failed(.cancelled))]
    if let index = fetches.waiting.firstIndex(where: { $0.id == id }) {
      fetches.waiting.remove(at: index)
      return finished
    }
    if fetches.sent.removeValue(forKey: id) != nil {
      fetches.prune()
      return [.cancel(id)] + finished
    }
    if let index = fetches.held.firstIndex(where: { $0.id == id }) {
      fetches.held.remove(at: index)
      fetches.prune()
      return finished
    }
    return []
  }

  /// The fetches under way, as the snapshot shows them.
  public var fetchStatuses: [FetchStatus] { fetches.statuses }

  /// A fetch answered. A page read against another queue than the finger's is asked for again; otherwise
  /// it is merged once the finger has reached its event id, with the events applied since applied to it.
  public mutating func fetchSucceeded<Item>(_ id: RequestID, _ answer: FetchAnswer<Item>, now: Timestamp) -> [Action] {
    fetchAnswered(id, answer, now: now)
  }

  /// ``fetchSucceeded(_:_:now:)`` with the item type hidden (the shell's view).
  mutating func fetchAnswered(_ id: RequestID, _ answer: any FetchAnswering, now: Timestamp) -> [Action] {
    guard let sent = fetches.sent.removeValue(forKey: id) else { return [] }
    guard let finger = phase.finger, answer.queueID == finger.queueID, answer.queueID == sent.queueID else {
      // The queue changed while the page was read: its event id means nothing to this finger.
      fetches.waiting.append(.init(id: id, request: sent.request, notOn: answer.queueID))
      fetches.prune()
      return proceedFetches(now: now)
    }
    guard answer.lastEventID >= sent.sentAfter else {
      fetches.prune()
      let reason = "page read at event \(answer.lastEventID), before the finger \(sent.sentAfter) it was sent at"
      return [.fetchFinished(id, .failed(.api(EventAPIError(code: .malformedResponse, message: reason))))]
    }
    fetches.held.append(.init(id: id, request: sent.request, lastEventID: answer.lastEventID, answer: answer))
    let pages = mergeReadyPages(finger: finger.lastEventID)
    var actions = (pages.merged ? [persistAction()] : []) + pages.actions
    if !fetches.held.isEmpty, case .idle(let finger, _) = phase, inFlight == nil {
      // A page is ahead of a background machine's finger: catch up now rather than at the next poll.
      phase = .idle(finger, nextPollAt: now)
      actions += proceed(now: now)
    }
    return actions
  }

  /// A fetch failed. On a queue that is gone it waits for the next queue. A failure worth retrying (no
  /// connection, a timeout, a 5xx, a rate limit) is tried again after the engine's backoff, as polls are
  /// (offline, at the network's return or the offline probe); the app sees it in ``fetchStatuses``. Only a
  /// request the server refuses ends the fetch as failed.
  public mutating func fetchFailed(_ id: RequestID, _ error: TransportError, now: Timestamp) -> [Action] {
    guard let sent = fetches.sent.removeValue(forKey: id) else { return [] }
    fetches.prune()
    if case .api(let apiError) = error.kind, apiError.code == .badEventQueueID {
      fetches.waiting.append(.init(id: id, request: sent.request, notOn: sent.queueID, attempt: sent.attempt))
      return proceedFetches(now: now)
    }
    metrics.failures += 1
    let (kind, retryAfter) = classify(error)
    guard kind != .protocolError else { return [.fetchFinished(id, .failed(error))] }
    let retryAt = now.advanced(by: wait(configuration.backoff, sent.attempt, retryAfter))
    fetches.waiting.append(
      .init(id: id, request: sent.request, notOn: nil, attempt: sent.attempt, retryAt: retryAt, failure: error)
    )
    return proceedFetches(now: now)
  }

  /// The network came back (or the app to the foreground): fetches waiting after a failure try now.
  mutating func retryFetchesNow() {
    for index in fetches.waiting.indices where fetches.waiting[index].retryAt != nil {
      fetches.waiting[index].retryAt = .distantPast
    }
  }

  /// Merges every held page whose event id the finger has reached; returns whether any merged (the state
  /// changed: the caller persists before the `.fetchFinished` actions) and those actions.
  mutating func mergeReadyPages(finger: Int) -> (merged: Bool, actions: [Action]) {
    guard let partial, fetches.held.contains(where: { $0.lastEventID <= finger }) else { return (false, []) }
    var actions: [Action] = []
    var merged = false
    var stillHeld: [FetchTracker<Event>.Held] = []
    for page in fetches.held {
      guard page.lastEventID <= finger else {
        stillHeld.append(page)
        continue
      }
      let replay = fetches.events(after: page.lastEventID, through: finger)
      do {
        guard try partial.merge(page.answer, replaying: replay, into: &confirmedState!, keeping: shownNarrows) else {
          actions.append(.fetchFinished(page.id, .failed(.api(.malformedResponse("the page holds another item type")))))
          continue
        }
        unsavedChange = .replaced
        merged = true
        metrics.eventsReplayedOnPages += replay.count
        actions.append(.fetchFinished(page.id, .merged))
      } catch {
        actions.append(.fetchFinished(page.id, .failed(.api(.malformedResponse(error.description)))))
      }
    }
    fetches.held = stillHeld
    fetches.prune()
    return (merged, actions)
  }

  /// Sends the fetches waiting for a queue, when there is one.
  mutating func proceedFetches(now: Timestamp) -> [Action] {
    guard let finger = phase.finger, !fetches.waiting.isEmpty else { return [] }
    if case .stopped = phase { return [] }
    var actions: [Action] = []
    var stillWaiting: [FetchTracker<Event>.Waiting] = []
    for waiting in fetches.waiting {
      guard waiting.notOn != finger.queueID, waiting.retryAt.map({ $0 <= now }) ?? true else {
        stillWaiting.append(waiting)
        continue
      }
      let deadline = now.advanced(by: configuration.registerTimeout)
      fetches.sent[waiting.id] = .init(
        request: waiting.request,
        queueID: finger.queueID,
        sentAfter: finger.lastEventID,
        deadline: deadline,
        attempt: waiting.attempt + 1
      )
      metrics.fetches += 1
      actions.append(
        .fetch(waiting.id, waiting.request, queueID: finger.queueID, timeout: configuration.registerTimeout)
      )
    }
    fetches.waiting = stillWaiting
    return actions
  }

  /// The narrows the app shows now (``UpdateMachine/show(_:)``): used now, and never forgotten while shown,
  /// even past the limits. A narrow not held yet is kept once fetched.
  public mutating func show(_ narrows: Set<Narrow>) {
    shownNarrows = narrows
    guard partial != nil, confirmedState != nil else { return }
    for narrow in narrows.sorted(by: { $0.description < $1.description }) {
      partial!.markUsed(narrow, in: &confirmedState!)
    }
    enforcePartialLimits()
  }

  /// Applies the app's limits to the partial state and forgets what is past them (never a shown narrow).
  /// Forgetting is not journaled: a record read back holds more of the cache, never less of the truth.
  mutating func enforcePartialLimits() {
    guard let partial, confirmedState != nil else { return }
    _ = partial.enforce(configuration.partialLimits, keeping: shownNarrows, in: &confirmedState!)
  }

  /// A new queue replaced the old one: what was known becomes stale, pages read against the old queue are
  /// asked for again, and the narrows last on screen are fetched again.
  mutating func queueReplaced(previous: State?) {
    guard let partial else { return }
    var refetch: [FetchRequest] = []
    if let previous { refetch = partial.retire(from: previous, into: &confirmedState!) }
    for page in fetches.held { fetches.waiting.append(.init(id: page.id, request: page.request, notOn: nil)) }
    fetches.held = []
    fetches.prune()
    let asked = Set(fetches.waiting.map(\.request.narrow) + fetches.sent.values.map(\.request.narrow))
    for request in refetch where !asked.contains(request.narrow) {
      fetches.waiting.append(.init(id: newRequestID(), request: request, notOn: nil))
    }
  }

  /// Fetches whose deadline passed: cancelled, and reported failed.
  mutating func fetchesTimedOut(now: Timestamp) -> [Action] {
    var actions: [Action] = []
    for (id, sent) in fetches.sent where sent.deadline <= now {
      actions.append(.cancel(id))
      actions += fetchFailed(id, .timedOut, now: now)
    }
    return actions
  }

  /// The machine stopped: every fetch under way, waiting or held fails.
  mutating func abandonFetches(_ error: TransportError) -> [Action] {
    var actions: [Action] = []
    for id in fetches.sent.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
      actions += [.cancel(id), .fetchFinished(id, .failed(error))]
    }
    for id in fetches.waiting.map(\.id) + fetches.held.map(\.id) { actions.append(.fetchFinished(id, .failed(error))) }
    fetches = FetchTracker()
    return actions
  }
}

/// A ``FetchAnswer`` of any item type: what the core reads of it before the composer merges it.
protocol FetchAnswering: Sendable {
  var queueID: QueueID { get }
  var lastEventID: Int { get }
}

extension FetchAnswer: FetchAnswering {}
