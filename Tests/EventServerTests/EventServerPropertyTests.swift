import EventProtocol
import Foundation
import SampleApps
import TestScheduling
import Testing
import UpdateMachineTesting

@testable import EventServer

/// Random interleavings of every server input, checked step by step against a trivially correct model:
/// each queue is the full history of events pushed to it (with who caused each, and the mutation) plus an
/// acknowledgement mark. The server stores each event once for all the queues holding it; the model gives
/// each queue its own copy.
@Suite("EventServer properties over random schedules")
struct EventServerPropertyTests {
  @Test("the machine matches the reference model", .cpuBound, arguments: TestSeeds.first(100, of: 500) as Range<UInt64>)
  func matchesReferenceModel(seed: UInt64) throws {
    var run = ServerScheduleRun(seed: seed)
    for _ in 0..<200 {
      run.step()
      if let failure = run.failure {
        Issue.record(
          "seed \(seed): \(failure)\ntrace (replay with this seed):\n\(run.trace.suffix(25).joined(separator: "\n"))"
        )
        return
      }
    }
  }

  /// The same schedules with each answer written through `EventEnvelope` itself instead of through
  /// `StoredEnvelope` (the path taken if the two layouts ever differed): the same answers.
  @Test(
    "answers written through the envelope's own type match the model too",
    .cpuBound,
    arguments: 0..<100 as Range<UInt64>
  )
  func matchesReferenceModelThroughEnvelopes(seed: UInt64) throws {
    var run = ServerScheduleRun(seed: seed, answersThroughStoredLayout: false)
    for _ in 0..<200 {
      run.step()
      if let failure = run.failure {
        Issue.record("seed \(seed): \(failure)\ntrace:\n\(run.trace.suffix(25).joined(separator: "\n"))")
        return
      }
    }
  }
}

/// Holds the first failure of a run, so checks need not mutate the run they read.
private final class FailureBox {
  var failure: String?
}

/// The reference model of one queue.
private struct ModelQueue {
  var owner: UserID
  var eventTypes: Set<String>?
  var idleTimeout: Duration
  var history: [ModelEvent] = []
  var acknowledged = -1
  var lastContact: Timestamp
  var parked: PollID?

  var pending: [EventEnvelope<NoteEvent>] {
    history.indices.dropFirst(acknowledged + 1).map {
      EventEnvelope(id: $0, body: history[$0].body, origin: history[$0].author == owner ? history[$0].origin : nil)
    }
  }

  /// How many pending events each other user's commands put here.
  var pendingByForeignAuthor: [UserID: Int] {
    var counts: [UserID: Int] = [:]
    for event in history.dropFirst(acknowledged + 1) {
      if let author = event.author, author != owner { counts[author, default: 0] += 1 }
    }
    return counts
  }

  func accepts(_ type: String) -> Bool { eventTypes?.contains(type) ?? true }

  func isExpired(at now: Timestamp) -> Bool { parked == nil && lastContact.duration(to: now) >= idleTimeout }
}

/// An event as the model's queues hold it.
private struct ModelEvent {
  var body: EventBody<NoteEvent>
  /// The user whose command caused it; `nil` for the server's own events.
  var author: UserID?
  /// The mutation that caused it, shown in the author's queues only.
  var origin: MutationOrigin?
  /// Which delivery it came from: the queues a command's event reached share it.
  var delivery: Int
}

private struct ServerScheduleRun {
  static let users: [UserID] = ["alice", "bob", "carol"]
  static let maximumQueuesPerUser = 3
  static let maximumEventsPerQueue = 6

  var random: SeededRandomNumberGenerator
  var machine: Machine
  var now = Timestamp(secondsSinceEpoch: 1_700_000_000)
  var queues: [QueueID: ModelQueue] = [:]
  var order: [UserID: [QueueID]] = [:]
  var notes: [UserID: [String]] = [:]
  var lastQueueGone: [UserID] = []
  var nextSweepAt: Timestamp
  var nextPollID: UInt64 = 0
  var noteCount = 0
  var mutationCount: UInt64 = 0
  var deliveryCount = 0
  var removedQueueIDs: [QueueID] = []
  var trace: [String] = []
  private let failureBox = FailureBox()
  var failure: String? { failureBox.failure }

  /// Whether the machines answer through `StoredEnvelope` (the default) or through `EventEnvelope`.
  let answersThroughStoredLayout: Bool

  init(seed: UInt64, answersThroughStoredLayout: Bool = true) {
    random = SeededRandomNumberGenerator(seed: seed)
    self.answersThroughStoredLayout = answersThroughStoredLayout
    machine = Self.makeMachine(
      application: NoteBoard(),
      seed: seed,
      now: now,
      answersThroughStoredLayout: answersThroughStoredLayout
    )
    nextSweepAt = now.advanced(by: .seconds(60))
  }

  static func makeMachine(
    application: NoteBoard,
    seed: UInt64,
    now: Timestamp,
    answersThroughStoredLayout: Bool
  ) -> Machine {
    var configuration = EventServerConfiguration()
    configuration.maximumQueuesPerUser = maximumQueuesPerUser
    configuration.maximumEventsPerQueue = maximumEventsPerQueue
    var machine = Machine(
      application: application,
      configuration: configuration,
      random: SeededRandomNumberGenerator(seed: seed &+ 1),
      now: now
    )
    machine.table.answersThroughStoredLayout = answersThroughStoredLayout
    return machine
  }

  func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition && failureBox.failure == nil { failureBox.failure = message() }
  }

  // MARK: Steps

  mutating func step() {
    switch Int.random(in: 0..<100, using: &random) {
    case 0..<14: register()
    case 14..<34: command()
    case 34..<64: poll()
    case 64..<70: cancel()
    case 70..<75: delete()
    case 75..<95: advanceTime()
    default: restart()
    }
    checkQueuesMatch()
  }

  mutating func register() {
    let user = Self.users.randomElement(using: &random)!
    let types: Set<String>? = [nil, ["note"], ["ping", "restart"], []].randomElement(using: &random)!
    let lifespan: Duration? = [nil, .zero, .seconds(30), .seconds(200)].randomElement(using: &random)!
    trace.append(
      "\(now) register \(user) types=\(types.map { $0.sorted() } ?? ["*"]) lifespan=\(String(describing: lifespan))"
    )
    var expected: [Machine.Action] = []
    for queueID in order[user] ?? [] where queues[queueID]!.isExpired(at: now) {
      expected += removeModelQueue(queueID)
    }
    while (order[user] ?? []).count >= Self.maximumQueuesPerUser {
      let victim = order[user]!.min { lhs, rhs in
        effectiveContact(queues[lhs]!) < effectiveContact(queues[rhs]!)
      }!
      expected += removeModelQueue(victim)
    }
    let (registration, actions) = machine.register(user: user, eventTypes: types, lifespan: lifespan, now: now)
    check(actions == expected, "register actions \(actions) != \(expected)")
    check(registration.lastEventID == -1, "new queue's lastEventID \(registration.lastEventID)")
    check(registration.snapshot == NoteSnapshot(notes: notes[user] ?? []), "snapshot \(registration.snapshot)")
    check(queues[registration.queueID] == nil && !removedQueueIDs.contains(registration.queueID), "queue id reused")
    let timeout: Duration = (lifespan == nil || lifespan == .zero) ? .seconds(600) : lifespan!
    queues[registration.queueID] = ModelQueue(owner: user, eventTypes: types, idleTimeout: timeout, lastContact: now)
    order[user, default: []].append(registration.queueID)
  }

  mutating func command() {
    let sender = Self.users.randomElement(using: &random)!
    let recipients = (0..<Int.random(in: 0...3, using: &random)).map { _ in Self.users.randomElement(using: &random)! }
    let roll = Int.random(in: 0..<10, using: &random)
    if roll == 0 {
      trace.append("\(now) forbidden command from \(sender)")
      let before = (machine.queues, machine.application)
      do {
        _ = try machine.handle(.forbidden, from: sender, now: now)
        check(false, "a forbidden command succeeded")
      } catch {
        check(error.code == .badRequest, "forbidden command error \(error)")
      }
      check(machine.queues == before.0 && machine.application == before.1, "a rejected command changed state")
      return
    }
    let event: NoteEvent
    if roll < 4 {
      event = .ping
    } else {
      noteCount += 1
      event = .note(text: "n\(noteCount)")
      for recipient in Set(recipients) { notes[recipient, default: []].append("n\(noteCount)") }
    }
    // A third of the commands are mutations: their events carry the origin in the sender's own queues.
    var origin: MutationOrigin?
    if Int.random(in: 0..<3, using: &random) == 0 {
      mutationCount += 1
      origin = MutationOrigin(
        clientID: ClientID(rawValue: "c-\(sender)"),
        mutationID: MutationID(rawValue: mutationCount)
      )
    }
    trace.append("\(now) \(sender) sends \(event) to \(recipients) origin \(String(describing: origin))")
    var expected: [Machine.Action] = []
    var seen: Set<UserID> = []
    deliveryCount += 1
    let delivery = deliveryCount
    for recipient in recipients where seen.insert(recipient).inserted {
      for queueID in order[recipient] ?? [] where queues[queueID]!.accepts(event.eventType) {
        expected += push(.payload(event), to: queueID, author: sender, origin: origin, delivery: delivery)
      }
    }
    let command: NoteBoard.Command =
      if case .note(let text) = event { .post(text, to: recipients) } else { .ping(to: recipients) }
    do {
      let actions: [Machine.Action]
      if let origin {
        actions = try machine.applyMutation(
          command,
          from: sender,
          clientID: origin.clientID,
          mutationID: origin.mutationID,
          digest: MutationDigest(of: command),
          now: now
        ).1
      } else {
        actions = try machine.handle(command, from: sender, now: now)
      }
      check(actions == expected, "command actions \(actions) != \(expected)")
    } catch {
      check(false, "command failed: \(error)")
    }
  }

  mutating func poll() {
    let known = queues.keys.sorted() + removedQueueIDs.suffix(2)
    let queueID: QueueID =
      known.isEmpty || Int.random(in: 0..<20, using: &random) == 0
      ? "unknown-queue" : known.randomElement(using: &random)!
    let owner = queues[queueID]?.owner ?? Self.users[0]
    let user = Int.random(in: 0..<10, using: &random) == 0 ? Self.users.randomElement(using: &random)! : owner
    let model = queues[queueID]
    let acknowledged = model?.acknowledged ?? -1
    let newest = (model?.history.count ?? 0) - 1
    let lastEventID: Int =
      switch Int.random(in: 0..<10, using: &random) {
      case 0: acknowledged - Int.random(in: 1...2, using: &random)
      case 1: newest + Int.random(in: 1...2, using: &random)
      case 2...5: newest
      default: Int.random(in: acknowledged...max(acknowledged, newest), using: &random)
      }
    let dontBlock = Int.random(in: 0..<3, using: &random) == 0
    let pollID = PollID(nextPollID)
    nextPollID += 1
    trace.append("\(now) \(pollID) \(user) polls \(queueID) after \(lastEventID) dontBlock=\(dontBlock)")

    var expected: [Machine.Action] = []
    let before = machine.queues
    let outcome = validate(queueID, user: user, lastEventID: lastEventID, expected: &expected)
    let actions = machine.poll(
      pollID,
      queueID: queueID,
      user: user,
      lastEventID: lastEventID,
      dontBlock: dontBlock,
      now: now
    )
    if let error = outcome {
      expected.append(.completePoll(pollID, .failed(error)))
      check(actions == expected, "refused poll actions \(actions) != \(expected)")
      let survivors = before.filter { queues[$0.key] != nil }
      check(machine.queues == survivors, "a refused poll changed a queue")
      return
    }
    queues[queueID]!.acknowledged = max(acknowledged, lastEventID)
    queues[queueID]!.lastContact = now
    if let displaced = queues[queueID]!.parked {
      queues[queueID]!.parked = nil
      expected.append(.completePoll(displaced, .events(queues[queueID]!.pending)))
    }
    let pending = queues[queueID]!.pending
    if !pending.isEmpty || dontBlock {
      expected.append(.completePoll(pollID, .events(pending)))
    } else {
      queues[queueID]!.parked = pollID
      let heartbeatAt = machine.queues[queueID]?.parkedPoll?.heartbeatAt
      let wait = heartbeatAt.map { now.duration(to: $0) } ?? .zero
      check(wait >= .seconds(45) && wait <= .seconds(55), "heartbeat deadline \(String(describing: heartbeatAt))")
    }
    check(actions == expected, "poll actions \(actions) != \(expected)")
    for case .completePoll(_, .events(let events)) in actions {
      check(zip(events, events.dropFirst()).allSatisfy { $0.id < $1.id }, "ids not increasing in \(events)")
      check(events.allSatisfy { $0.id > lastEventID }, "an acknowledged event was delivered again")
    }
  }

  mutating func cancel() {
    let parked = queues.values.compactMap(\.parked).sorted()
    let pollID = parked.randomElement(using: &random) ?? PollID(nextPollID &+ 1_000)
    trace.append("\(now) cancel \(pollID)")
    let actions = machine.pollCancelled(pollID, now: now)
    if let queueID = queues.first(where: { $0.value.parked == pollID })?.key {
      queues[queueID]!.parked = nil
      queues[queueID]!.lastContact = now
      check(actions == [.completePoll(pollID, .cancelled)], "cancel actions \(actions)")
    } else {
      check(actions == [], "cancelling an unparked poll did \(actions)")
    }
  }

  mutating func delete() {
    guard let queueID = queues.keys.sorted().randomElement(using: &random) else { return }
    let user =
      Int.random(in: 0..<4, using: &random) == 0 ? Self.users.randomElement(using: &random)! : queues[queueID]!.owner
    trace.append("\(now) \(user) deletes \(queueID)")
    var expected: [Machine.Action] = []
    let refusal = validate(queueID, user: user, lastEventID: queues[queueID]!.acknowledged, expected: &expected)
    do {
      let actions = try machine.deleteQueue(queueID, user: user, now: now)
      if refusal == nil { expected += removeModelQueue(queueID) }
      check(actions == expected, "delete actions \(actions) != \(expected)")
    } catch {
      check(
        refusal == error && expected.isEmpty,
        "delete refused with \(error), model said \(String(describing: refusal))"
      )
    }
  }

  mutating func advanceTime() {
    let step: Duration = [.zero, .seconds(1), .seconds(20), .seconds(50), .seconds(61), .seconds(700)]
      .randomElement(using: &random)!
    now = now.advanced(by: step + .milliseconds(Int64.random(in: 0..<1_000, using: &random)))
    trace.append("\(now) timer")
    var expected: [Machine.Action] = []
    let due = queues.compactMap { queueID, queue -> (Timestamp, PollID, QueueID)? in
      guard let pollID = queue.parked, let at = machine.queues[queueID]?.parkedPoll?.heartbeatAt, at <= now else {
        return nil
      }
      return (at, pollID, queueID)
    }
    for (_, _, queueID) in due.sorted(by: { ($0.0, $0.1) < ($1.0, $1.1) }) {
      expected += push(.heartbeat, to: queueID)
    }
    if now >= nextSweepAt {
      for queueID in queues.keys.sorted() where queues[queueID]!.isExpired(at: now) {
        expected += removeModelQueue(queueID)
      }
      nextSweepAt = now.advanced(by: .seconds(60))
    }
    let actions = machine.timerFired(now: now)
    check(actions == expected, "timer actions \(actions) != \(expected)")
  }

  mutating func restart() {
    trace.append("\(now) server restarts")
    let expected: [Machine.Action] = queues.values.compactMap(\.parked).sorted().map { .completePoll($0, .cancelled) }
    let dropped = machine.connectionsDropped(now: now)
    check(dropped == expected, "dropped \(dropped) != \(expected)")
    let dump: QueueDump<NoteEvent>
    do {
      dump = try JSONDecoder().decode(QueueDump<NoteEvent>.self, from: WireFormat.encode(machine.dump()))
    } catch {
      check(false, "dump round trip failed: \(error)")
      return
    }
    machine = Self.makeMachine(
      application: machine.application,
      seed: random.next(),
      now: now,
      answersThroughStoredLayout: answersThroughStoredLayout
    )
    nextSweepAt = now.advanced(by: .seconds(60))
    do {
      let actions = try machine.restore(dump, now: now)
      check(actions == [], "restore actions \(actions)")
    } catch {
      check(false, "restore failed: \(error)")
    }
    order = [:]
    for queueID in queues.keys.sorted() {
      // A dump holds each queue's events apart: restored, each is stored on its own.
      for index in queues[queueID]!.history.indices {
        deliveryCount += 1
        queues[queueID]!.history[index].delivery = deliveryCount
      }
      queues[queueID]!.parked = nil
      queues[queueID]!.lastContact = now
      order[queues[queueID]!.owner, default: []].append(queueID)
    }
    for queueID in queues.keys.sorted() where queues[queueID]!.accepts("restart") {
      _ = push(.restart, to: queueID)
    }
  }

  // MARK: Model rules

  func effectiveContact(_ queue: ModelQueue) -> Timestamp { queue.parked == nil ? queue.lastContact : now }

  /// The error the model expects, removing an expired queue as the machine must.
  mutating func validate(
    _ queueID: QueueID,
    user: UserID,
    lastEventID: Int,
    expected: inout [Machine.Action]
  ) -> EventAPIError? {
    guard let queue = queues[queueID], queue.owner == user else { return .badEventQueueID(queueID) }
    if queue.isExpired(at: now) {
      expected += removeModelQueue(queueID)
      return .badEventQueueID(queueID)
    }
    if lastEventID >= queue.history.count || lastEventID < -1 { return .notInQueue(lastEventID: lastEventID) }
    if lastEventID < queue.acknowledged { return .alreadyPruned(lastEventID: lastEventID) }
    return nil
  }

  mutating func push(
    _ body: EventBody<NoteEvent>,
    to queueID: QueueID,
    author: UserID? = nil,
    origin: MutationOrigin? = nil,
    delivery: Int? = nil
  ) -> [Machine.Action] {
    // A heartbeat counts as contact; an event that wakes a parked poll does not (the client's next poll does).
    if case .heartbeat = body { queues[queueID]!.lastContact = now }
    guard queues[queueID]!.pending.count < Self.maximumEventsPerQueue else { return removeModelQueue(queueID) }
    if delivery == nil { deliveryCount += 1 }
    let event = ModelEvent(body: body, author: author, origin: origin, delivery: delivery ?? deliveryCount)
    queues[queueID]!.history.append(event)
    guard let parked = queues[queueID]!.parked else { return [] }
    queues[queueID]!.parked = nil
    return [.completePoll(parked, .events(queues[queueID]!.pending))]
  }

  mutating func removeModelQueue(_ queueID: QueueID) -> [Machine.Action] {
    let queue = queues.removeValue(forKey: queueID)!
    removedQueueIDs.append(queueID)
    order[queue.owner]!.removeAll { $0 == queueID }
    if order[queue.owner]!.isEmpty {
      order[queue.owner] = nil
      lastQueueGone.append(queue.owner)
    }
    return queue.parked.map { [.completePoll($0, .failed(.badEventQueueID(queueID)))] } ?? []
  }

  mutating func checkQueuesMatch() {
    let modelParked = queues.values.filter { $0.parked != nil }.count
    check(machine.parkedPollCount == modelParked, "parked count \(machine.parkedPollCount) != model \(modelParked)")
    check(
      Set(machine.queues.keys) == Set(queues.keys),
      "queues \(machine.queues.keys.sorted()) != model \(queues.keys.sorted())"
    )
    for (queueID, model) in queues {
      guard let queue = machine.queues[queueID] else { continue }
      check(queue.events == model.pending, "\(queueID) holds \(queue.events), model \(model.pending)")
      check(queue.nextEventID == model.history.count, "\(queueID) next id \(queue.nextEventID)")
      check(queue.prunedThrough == model.acknowledged, "\(queueID) pruned \(queue.prunedThrough)")
      check(queue.parkedPoll?.pollID == model.parked, "\(queueID) parked \(String(describing: queue.parkedPoll))")
    }
    var pendingByAuthor: [UserID: Int] = [:]
    for model in queues.values { pendingByAuthor.merge(model.pendingByForeignAuthor, uniquingKeysWith: +) }
    for user in Self.users {
      check(machine.queueIDs(of: user) == (order[user] ?? []), "\(user)'s queue order")
      let pending = machine.pendingEvents(authoredBy: user)
      check(pending == pendingByAuthor[user, default: 0], "\(user) has \(pending) pending in others' queues")
    }
    // Each event is stored once however many queues hold it, and only while one does.
    let distinctPending = Set(queues.values.flatMap { $0.history.dropFirst($0.acknowledged + 1).map(\.delivery) })
    let stored = machine.table.store.storedEventCount
    check(stored == distinctPending.count, "\(stored) events stored, \(distinctPending.count) distinct pending")
    check(
      machine.application.usersWhoseLastQueueWentAway == lastQueueGone,
      "last-queue notices \(machine.application.usersWhoseLastQueueWentAway) vs \(lastQueueGone)"
    )
  }
}
