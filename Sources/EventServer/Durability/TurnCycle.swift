import EventProtocol

/// A cluster node's turn cycle (``SharedServerLog``): whether a turn is under way and whether it has decided,
/// the rebuild after a turn whose outcome the node could not learn, and the moment after a failed turn when
/// requests fail at once. A pure machine: the node's shell asks it what to do at each event and performs the
/// answer (it starts the turn, answers or fails the inputs, rebuilds the machine from the log).
///
/// One turn at a time: the inputs that arrive while a turn is under way wait for the next one, which starts
/// when this one ends. A turn that ends late, after the node gave it up (the log abandoned it at its
/// deadline), finds another number or none, and its outcome is ignored.
///
/// ```swift
/// var turns = TurnCycle()
/// turns.inputsWaiting()                 // .startTurn(number: 1)
/// turns.turnDecided(1)                  // the node's machine is ahead of the log until the commit
/// turns.turnCommitted(1)                // .answer
/// ```
struct TurnCycle: Sendable, Equatable {
  private enum Phase: Sendable, Equatable {
    /// No turn is under way: the next input starts one.
    case betweenTurns
    /// Turn `number` was asked of the log and has not ended. Once it `decided` (in the log's lock), the node's
    /// machine is ahead of the log until the turn commits.
    case inTurn(number: Int, decided: Bool)
    /// A turn failed after deciding: the node rebuilds its state from the log and refuses every request
    /// with `failure` meanwhile.
    case rejoining(after: ServerLogError)
  }

  private var phase: Phase = .betweenTurns
  /// Messages from other partitions wait in this partition's inbox: the next turn takes them, even with no
  /// input waiting (``PartitionedSharedLog``).
  private var inboxWaiting = false
  /// The timer's decision (heartbeats, sweeps, deadlines) waits for a turn: one is enough.
  private var timerDecisionWaiting = false
  /// The fresh failure of a turn that decided nothing.
  private var failFast = FailFast()
  /// How many turns the node started.
  private(set) var turnsStarted = 0
  /// How many times the node rebuilt itself from the log.
  private(set) var rejoins = 0

  /// What the shell does next.
  enum Start: Sendable, Equatable {
    /// Ask the log for turn `number`, carrying every input waiting.
    case startTurn(number: Int)
    /// Nothing: a turn is under way (its end starts the next), the node is rebuilding itself, or nothing waits.
    case none
  }

  /// What the shell does with a turn that committed.
  enum Commit: Sendable, Equatable {
    /// Mark what the turn decided durable and answer its inputs; the cycle is between turns.
    case answer
    /// Nothing: the turn was given up before (its number is not the one under way).
    case ignore
  }

  /// What the shell does with a turn that failed.
  enum Failure: Sendable, Equatable {
    /// Nothing: the turn was given up before.
    case ignore
    /// What the turn decided may or may not be in the log: fail everything waiting on the machine and
    /// rebuild it from the log (the cycle refuses every request meanwhile).
    case rejoin
    /// The log has stopped for good: fail the inputs waiting; no more turns start.
    case failWaiting
    /// Nothing was decided: fail the inputs waiting; new requests fail at once until `until`.
    case failWaitingAndRefuseUntil(Timestamp)
  }

  /// What the shell does when the timer fires.
  enum TimerDecision: Sendable, Equatable {
    /// Add the timer's decision to the next turn.
    case enqueue
    /// Nothing: the timer's decision already waits for a turn.
    case alreadyWaiting
  }

  /// A cycle between turns, with no turn started.
  init() {}

  /// Whether a turn is under way.
  var isTurnUnderWay: Bool {
    if case .inTurn = phase { return true }
    return false
  }

  /// Whether turn `number` is the one under way (a turn given up finds another number, or none).
  func isActive(_ number: Int) -> Bool {
    if case .inTurn(number, _) = phase { return true }
    return false
  }

  /// Why the node is rebuilding itself from the log, while it is.
  var rejoiningAfter: ServerLogError? {
    if case .rejoining(let failure) = phase { return failure }
    return nil
  }

  /// Whether what other nodes committed may be applied by the follower now: not once the turn under way
  /// has decided (the turn applies them itself, holding the log's lock), nor while the node rebuilds itself.
  var followerMayApply: Bool {
    switch phase {
    case .betweenTurns, .inTurn(_, decided: false): true
    case .inTurn(_, decided: true), .rejoining: false
    }
  }

  /// Until when requests fail at once after a turn that decided nothing failed (``refusal(now:)``).
  var refusingUntil: Timestamp? { failFast.until }

  /// An input waits for a turn (or a turn ended and `waiting` tells whether any still does).
  /// - Parameter waiting: Whether any input waits for a turn.
  /// - Returns: ``Start/startTurn(number:)`` when a turn starts now.
  mutating func inputsWaiting(_ waiting: Bool = true) -> Start {
    guard case .betweenTurns = phase, waiting || inboxWaiting else { return .none }
    inboxWaiting = false
    turnsStarted += 1
    phase = .inTurn(number: turnsStarted, decided: false)
    return .startTurn(number: turnsStarted)
  }

  /// The partition's inbox holds messages from other partitions: the next turn takes them.
  mutating func inboxAnnounced() -> Start {
    inboxWaiting = true
    return inputsWaiting(false)
  }

  /// Turn `number` decided its inputs, holding the log's lock (again, when the log ran the turn's body twice).
  mutating func turnDecided(_ number: Int) {
    guard case .inTurn(number, _) = phase else {
      preconditionFailure("turn \(number) decided in phase \(phase)")
    }
    phase = .inTurn(number: number, decided: true)
  }

  /// Turn `number` committed.
  mutating func turnCommitted(_ number: Int) -> Commit {
    guard isActive(number) else { return .ignore }
    phase = .betweenTurns
    return .answer
  }

  /// Turn `number` failed with `failure`.
  /// - Parameters:
  ///   - number: The turn.
  ///   - failure: Why.
  ///   - logStopped: Whether the log has stopped for good (a damaged record, a write that failed).
  ///   - now: The time now.
  ///   - refuseFor: How long requests fail at once after a turn that decided nothing.
  mutating func turnFailed(
    _ number: Int,
    with failure: ServerLogError,
    logStopped: Bool,
    now: Timestamp,
    refuseFor: Duration
  ) -> Failure {
    guard case .inTurn(number, let decided) = phase else { return .ignore }
    if decided, !logStopped {
      phase = .rejoining(after: failure)
      return .rejoin
    }
    phase = .betweenTurns
    if logStopped { return .failWaiting }
    failFast.failed(with: failure, now: now, for: refuseFor)
    return .failWaitingAndRefuseUntil(now.advanced(by: refuseFor))
  }

  /// The node rebuilt its state from the log: it serves again, and turns start.
  mutating func rejoined() {
    guard case .rejoining = phase else { preconditionFailure("rejoined in phase \(phase)") }
    phase = .betweenTurns
    failFast.forget()
    rejoins += 1
  }

  /// Why a request fails at once now, if it does: the node is rebuilding itself, or a turn that decided
  /// nothing failed a moment ago (forgotten once its moment is over).
  mutating func refusal(now: Timestamp) -> ServerLogError? {
    if case .rejoining(let failure) = phase { return failure }
    return failFast.refusal(now: now)
  }

  /// The timer fired: its decision waits for the next turn, once.
  mutating func timerFired() -> TimerDecision {
    guard !timerDecisionWaiting else { return .alreadyWaiting }
    timerDecisionWaiting = true
    return .enqueue
  }

  /// The timer's decision was taken in a turn, or failed with it.
  mutating func timerDecisionEnded() {
    timerDecisionWaiting = false
  }
}

extension TurnCycle: CustomStringConvertible {
  /// The cycle, for ``EventServer/waitDiagnostics``.
  var description: String {
    var parts: [String]
    switch phase {
    case .betweenTurns: parts = ["turn idle"]
    case .inTurn(let number, let decided): parts = ["turn under way (#\(number)\(decided ? ", decided" : ""))"]
    case .rejoining(let failure): parts = ["rejoining after \(failure)"]
    }
    parts += [
      "turns started \(turnsStarted)",
      "timer decision waiting \(timerDecisionWaiting)",
      "inbox waiting \(inboxWaiting)",
    ]
    if let until = failFast.until { parts.append("failing fast until \(until)") }
    return parts.joined(separator: "; ")
  }
}
