import EventProtocol

/// The outbox's own state machine: an app's writes from submission to confirmation.
///
/// Its rules, all in this file:
/// - A write gets the next mutation id of this installation's client id. It is sent only once a record
///   holding it has been saved (`saved(clientID:nextMutationID:)`), so a crash can never make the next
///   write reuse an id that reached the server.
/// - One request is in flight at a time: a batch of the oldest unacknowledged saved writes, in order (at
///   most the core's ``UpdateMachineConfiguration/maximumMutationsPerRequest``). The server decides each
///   in order and answers an outcome per write decided; writes it did not decide go in the next batch. A
///   failure of the whole request waits for the backoff the core computes.
/// - A new batch goes only once the answers to the previous are in a saved record
///   (``saved(clientID:nextMutationID:pending:)``): a crash can then leave at most one batch the server
///   decided looking unsent, and the server remembers that many decisions.
/// - A whole batch refused with `BAD_REQUEST` (a write in it that the server cannot even read) is sent
///   again one write at a time, so the refusal lands on the write that earned it.
/// - An acknowledged write is never sent again. It stays (for its optimistic effect) until the events
///   show it: an event whose `MutationOrigin` names it (``eventsApplied(_:)``), or a finger at or past its
///   receipt (``confirm(by:)``).
/// - A refused write (`BAD_REQUEST`) moves to ``rejected`` for the app to show.
/// - A write answered `MUTATION_ID_REUSED` (another installation restored from the same backup, or a
///   counter that went backwards) makes the outbox take a new client id and renumber every entry; nothing
///   is dropped.
///
/// The core composes it: it allocates request ids, computes backoff delays and decides when to persist.
///
/// ```swift
/// var outbox = Outbox<NoteCommand>(clientID: "c1")
/// let id = outbox.append(.post("hi"), now: t0)          // m1, not sendable until saved
/// outbox.saved(clientID: "c1", nextMutationID: outbox.nextMutationID)
/// let request = outbox.send(RequestID(rawValue: 1), now: t0, deadline: t30)   // MutationRequest for m1
/// ```
public struct Outbox<Mutation: Codable & Sendable & Equatable>: Sendable, Equatable {
  /// Where sending stands.
  enum Sending: Sendable, Equatable {
    /// Nothing in flight; the next write may go at once. `failures` counts consecutive failures.
    case ready(failures: Int)
    /// The last send failed; the next may go at `retryAt`.
    case waiting(failures: Int, retryAt: Timestamp)
    /// `mutations` (in order) are in flight as `request`; it times out at `deadline`.
    case inFlight(RequestID, mutations: [MutationID], failures: Int, deadline: Timestamp)
  }

  /// How a failed send ends.
  public enum FailureOutcome: Sendable, Equatable {
    /// The request did not belong to the outbox, or its entry is gone: nothing changed.
    case ignored
    /// The write will be sent again at `retryAt`.
    case willRetry(retryAt: Timestamp)
    /// The server refused the write; it moved to ``rejected``.
    case rejected(MutationID)
    /// The server said the id was already used for another write: the outbox needs a new client id
    /// (``adoptClientID(_:)``) before it sends again.
    case needsNewClientID
  }

  /// This installation's id, as the server knows its mutations.
  public internal(set) var clientID: ClientID
  /// The writes not yet confirmed, oldest first.
  public internal(set) var entries: [OutboxEntry<Mutation>]
  /// Writes the server refused, for the app to show until it dismisses them.
  public internal(set) var rejected: [RejectedMutation<Mutation>]
  /// The id the next write gets.
  public internal(set) var nextMutationID: MutationID
  /// Writes with ids below this one are in a saved record under ``clientID``; only they may be sent.
  public internal(set) var savedThrough: MutationID
  var sending: Sending = .ready(failures: 0)
  /// Set when a whole batch was refused: writes go one at a time until the next answer.
  var isolating = false
  /// The writes the last saved record holds unacknowledged.
  var savedPending: Set<MutationID> = []

  /// An empty outbox for a new installation.
  public init(clientID: ClientID) {
    self.init(clientID: clientID, entries: [], rejected: [], nextMutationID: MutationID(1))
  }

  /// An outbox restored from a saved record: everything in it is saved.
  public init(
    clientID: ClientID,
    entries: [OutboxEntry<Mutation>],
    rejected: [RejectedMutation<Mutation>],
    nextMutationID: MutationID
  ) {
    self.clientID = clientID
    self.entries = entries
    self.rejected = rejected
    self.nextMutationID = nextMutationID
    self.savedThrough = nextMutationID
    self.savedPending = Set(entries.filter { !$0.isAcknowledged }.map(\.id))
  }

  /// The request in flight, if any.
  public var requestInFlight: RequestID? {
    if case .inFlight(let request, _, _, _) = sending { request } else { nil }
  }

  /// The writes in flight, in order.
  public var mutationsInFlight: [MutationID] {
    if case .inFlight(_, let mutations, _, _) = sending { mutations } else { [] }
  }

  /// How many sends in a row have failed: the attempt number for the next backoff is one more.
  public var consecutiveFailures: Int {
    switch sending {
    case .ready(let failures), .waiting(let failures, _), .inFlight(_, _, let failures, _): failures
    }
  }

  // MARK: - Inputs

  /// The app submits a write. It is sent only after a record holding it is saved.
  /// - Parameters:
  ///   - mutation: The write.
  ///   - now: When it was submitted.
  ///   - replaces: Whether the new write makes an older one pointless; older writes never sent for which
  ///     it answers `true` are dropped (the server never saw their ids, and skipping ids is allowed).
  /// - Returns: Its mutation id.
  public mutating func append(
    _ mutation: Mutation,
    now: Timestamp,
    replacing replaces: (Mutation) -> Bool = { _ in false }
  ) -> MutationID {
    let id = nextMutationID
    nextMutationID = MutationID(id.rawValue &+ 1)
    dropReplaced(by: replaces)
    entries.append(OutboxEntry(id: id, mutation: mutation, submittedAt: now))
    return id
  }

  /// Drops the never-sent writes `replaces` answers `true` for. They are the outbox's tail (writes go
  /// oldest first and every sent one counts an attempt), so only the tail is asked: a device far behind,
  /// holding thousands of writes the server has acknowledged, pays for its unsent writes alone.
  private mutating func dropReplaced(by replaces: (Mutation) -> Bool) {
    var start = entries.endIndex
    while start > entries.startIndex, entries[start - 1].attempts == 0, !entries[start - 1].isAcknowledged {
      start -= 1
    }
    guard start < entries.endIndex else { return }
    var kept = start
    for index in start..<entries.endIndex where !replaces(entries[index].mutation) {
      if kept != index { entries.swapAt(kept, index) }
      kept += 1
    }
    entries.removeSubrange(kept...)
  }

  /// A record holding every write below `nextMutationID`, under `clientID`, was saved.
  /// - Parameters:
  ///   - clientID: The client id the saved record holds.
  ///   - nextMutationID: The record's next mutation id: every write below it is saved.
  ///   - pending: The writes the saved record holds unacknowledged; `nil` when unknown (tools and tests
  ///     that only save writes).
  public mutating func saved(clientID: ClientID, nextMutationID: MutationID, pending: Set<MutationID>? = nil) {
    guard clientID == self.clientID else { return }
    savedThrough = max(savedThrough, nextMutationID)
    if let pending { savedPending = pending }
  }

  /// Whether every write the server decided is recorded as decided in the last saved record: until then no
  /// new batch goes out. So after a crash the record can hold at most one batch of writes the server
  /// already decided, and their repeats stay within the server's memory of decisions
  /// (`EventServerConfiguration.mutationWindow`): a repeat further back would look like a reused id.
  ///
  /// One pass over the outbox, since the machine asks on every step and a device behind holds thousands of
  /// writes: ids are unique in it, so every saved id is still pending exactly when as many pending entries
  /// are among them as there are saved ids.
  var decisionsSaved: Bool {
    if savedPending.isEmpty { return true }
    var stillPending = 0
    for entry in entries where !entry.isAcknowledged && savedPending.contains(entry.id) { stillPending += 1 }
    return stillPending == savedPending.count
  }

  /// Whether a write can be sent at `now`: one is waiting, saved, the server's last decisions are saved,
  /// and nothing is in flight or backing off.
  public func canSend(now: Timestamp) -> Bool {
    guard decisionsSaved else { return false }
    switch sending {
    case .inFlight: return false
    case .waiting(_, let retryAt) where retryAt > now: return false
    case .ready, .waiting: return nextToSend != nil
    }
  }

  private var nextToSend: Int? {
    guard let index = entries.firstIndex(where: { !$0.isAcknowledged }), entries[index].id < savedThrough else {
      return nil
    }
    return index
  }

  /// Sends the oldest unacknowledged saved writes, at most `maximumCount` (one while isolating a refused
  /// batch), as `request`.
  /// - Parameters:
  ///   - request: The request's identity, which its answer names.
  ///   - now: The time it is sent.
  ///   - deadline: When it counts as failed without an answer.
  ///   - maximumCount: The most writes it carries.
  ///   - queue: The queue the machine holds now, if any (see ``OutboxEntry/sentOnQueue``).
  /// - Returns: The request body, or `nil` when ``canSend(now:)`` is false.
  public mutating func send(
    _ request: RequestID,
    now: Timestamp,
    deadline: Timestamp,
    maximumCount: Int = 1,
    onQueue queue: QueueID? = nil
  ) -> MutationBatch<Mutation>? {
    guard canSend(now: now), let first = nextToSend else { return nil }
    let limit = isolating ? 1 : max(1, min(maximumCount, MutationBatch<Mutation>.maximumCount))
    var requests: [MutationRequest<Mutation>] = []
    for index in entries.indices[first...] where requests.count < limit {
      guard entries[index].id < savedThrough else { break }
      guard !entries[index].isAcknowledged else { continue }
      entries[index].attempts += 1
      entries[index].sentOnQueue = queue
      requests.append(
        MutationRequest(clientID: clientID, mutationID: entries[index].id, mutation: entries[index].mutation)
      )
    }
    sending = .inFlight(
      request,
      mutations: requests.map(\.mutationID),
      failures: consecutiveFailures,
      deadline: deadline
    )
    return MutationBatch(requests: requests)
  }

  /// How the server's answer to a batch ends.
  public struct Answer: Sendable, Equatable {
    /// The writes the server refused (moved to ``rejected``).
    public var rejected: [MutationID] = []
    /// The server said an id was already used for another write: the outbox needs a new client id
    /// (``adoptClientID(_:)``) before it sends again.
    public var needsNewClientID = false
    /// The answer decided nothing usable (no outcome, outcomes for other writes, or a refusal the outbox
    /// does not know): count a failure, as for a lost request.
    public var isFailure = false
  }

  /// The server answered `request` with `outcomes`, one per write it decided, in order. Acknowledged
  /// writes keep their receipts until the events show their effect; refused ones move to ``rejected``;
  /// writes not decided are sent again.
  /// - Parameters:
  ///   - request: The request answered.
  ///   - outcomes: One per write the server decided, in order.
  ///   - failureWait: The backoff before the next send, should the answer count as a failure.
  ///   - now: The time of the answer.
  /// - Returns: What the answer means, or `nil` when the request was not the outbox's.
  public mutating func answered(
    _ request: RequestID,
    _ outcomes: [MutationOutcome],
    failureWait: Duration,
    now: Timestamp
  ) -> Answer? {
    guard case .inFlight(request, let mutations, let failures, _) = sending else { return nil }
    var answer = Answer()
    var decided = 0
    for (mutation, outcome) in zip(mutations, outcomes) {
      guard outcome.mutationID == mutation else { break }
      switch outcome {
      case .acknowledged(_, let receipt):
        if let index = entries.firstIndex(where: { $0.id == mutation }) { entries[index].receipt = receipt }
      case .refused(_, let error) where error.code == .badRequest:
        if let index = entries.firstIndex(where: { $0.id == mutation }) {
          let entry = entries.remove(at: index)
          rejected.append(RejectedMutation(id: entry.id, mutation: entry.mutation, reason: error.message))
          answer.rejected.append(entry.id)
        }
      case .refused(_, let error) where error.code == .mutationIDReused:
        answer.needsNewClientID = true
      case .refused:
        answer.isFailure = true
      }
      if answer.needsNewClientID || answer.isFailure { break }
      decided += 1
    }
    if decided == 0 && !answer.needsNewClientID { answer.isFailure = true }
    isolating = false
    sending =
      answer.isFailure
      ? .waiting(failures: failures + 1, retryAt: now.advanced(by: failureWait)) : .ready(failures: 0)
    return answer
  }

  /// The server acknowledged the single write in flight as `request` (`answered(_:_:)` with its one
  /// outcome).
  /// - Returns: Whether the request was the outbox's.
  public mutating func acknowledged(_ request: RequestID, _ receipt: MutationReceipt) -> Bool {
    guard case .inFlight(request, let mutations, _, _) = sending, let first = mutations.first else { return false }
    return answered(request, [.acknowledged(first, receipt)], failureWait: .zero, now: Timestamp(sinceEpoch: .zero))
      != nil
  }

  /// Sending `request` failed with `error`; a transient failure retries after `wait`.
  public mutating func failed(
    _ request: RequestID,
    _ error: TransportError,
    wait: Duration,
    now: Timestamp
  ) -> FailureOutcome {
    guard case .inFlight(request, let mutations, let failures, _) = sending, let mutation = mutations.first else {
      return .ignored
    }
    if case .api(let apiError) = error.kind {
      if apiError.code == .mutationIDReused {
        sending = .ready(failures: 0)
        return .needsNewClientID
      }
      if apiError.code == .badRequest, mutations.count > 1 {
        // The whole batch was refused: find the write that earned it by sending one at a time.
        sending = .ready(failures: 0)
        isolating = true
        return .willRetry(retryAt: now)
      }
      if apiError.code == .badRequest {
        sending = .ready(failures: 0)
        guard let index = entries.firstIndex(where: { $0.id == mutation }) else { return .ignored }
        let entry = entries.remove(at: index)
        rejected.append(RejectedMutation(id: entry.id, mutation: entry.mutation, reason: apiError.message))
        return .rejected(entry.id)
      }
    }
    let retryAt = now.advanced(by: wait)
    sending = .waiting(failures: failures + 1, retryAt: retryAt)
    return .willRetry(retryAt: retryAt)
  }

  /// The request in flight, when its deadline has passed at `now`; the caller cancels it and reports
  /// ``failed(_:_:wait:now:)`` with a timeout.
  public func timedOutRequest(now: Timestamp) -> RequestID? {
    guard case .inFlight(let request, _, _, let deadline) = sending, deadline <= now else { return nil }
    return request
  }

  /// Gives up the request in flight without counting a failure (the machine stopped).
  /// - Returns: The request to cancel.
  public mutating func abandonInFlight() -> RequestID? {
    guard case .inFlight(let request, _, let failures, _) = sending else { return nil }
    sending = .ready(failures: failures)
    return request
  }

  /// The network came back or the app came to the foreground: a wait after connection failures ends now.
  public mutating func retryNow() {
    if case .waiting = sending { sending = .ready(failures: 0) }
  }

  /// Events were applied to the confirmed state; those whose origin is one of this client's writes retire
  /// them at once, acknowledged or not.
  public mutating func eventsApplied(_ origins: [MutationOrigin]) {
    let clientID = clientID
    let mine = Set(origins.filter { $0.clientID == clientID }.map(\.mutationID))
    guard !mine.isEmpty else { return }
    entries.removeAll { mine.contains($0.id) }
  }

  /// Drops acknowledged writes whose effect a client holding `finger` has seen.
  public mutating func confirm(by finger: EventFinger) {
    entries.removeAll { $0.receipt?.isReflected(by: finger, sentOn: $0.sentOnQueue) == true }
  }

  /// Takes a new client id after `MUTATION_ID_REUSED`: every entry is renumbered from 1 under it, and
  /// nothing is sent until a record with the new numbering is saved.
  public mutating func adoptClientID(_ newClientID: ClientID) {
    clientID = newClientID
    for index in entries.indices { entries[index].id = MutationID(UInt64(index) + 1) }
    nextMutationID = MutationID(UInt64(entries.count) + 1)
    savedThrough = MutationID(0)
    sending = .ready(failures: 0)
  }

  /// The app has shown the refused writes up to `id`.
  /// - Returns: Whether anything was forgotten.
  public mutating func dismissRejections(through id: MutationID) -> Bool {
    let before = rejected.count
    rejected.removeAll { $0.id <= id }
    return rejected.count != before
  }

  /// The next time the outbox has work: its retry time or its request's deadline.
  public var nextWakeUp: Timestamp? {
    switch sending {
    case .ready: nil
    case .waiting(_, let retryAt): nextToSend == nil ? nil : retryAt
    case .inFlight(_, _, _, let deadline): deadline
    }
  }
}
