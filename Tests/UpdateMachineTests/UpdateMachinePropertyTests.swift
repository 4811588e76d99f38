import EventProtocol
import Foundation
import TestSupport
import Testing

@testable import EventServer
@testable import UpdateMachine

/// Random schedules of responses, failures, lost answers, timeouts, lifecycle changes, pushes, writes,
/// client crashes (between any two actions) and server restarts, driving the client core against the real
/// server core. Then the faults stop, and the client must converge.
@Suite("UpdateMachine properties over random schedules")
struct UpdateMachinePropertyTests {
  @Test("no event applied twice or skipped, mutations at most once, convergence", arguments: 0..<1_000 as Range<UInt64>)
  func convergesUnderFaults(seed: UInt64) {
    var world = ClientWorld(seed: seed)
    for _ in 0..<150 where world.failure == nil {
      world.chaoticStep()
      world.checkInvariants()
    }
    if world.failure == nil { world.calmDown(maximumSteps: 400) }
    if let failure = world.failure {
      Issue.record(
        "seed \(seed): \(failure)\ntrace (replay with this seed):\n\(world.trace.suffix(40).joined(separator: "\n"))"
      )
    }
  }
}

private typealias ClientCore = UpdateMachineCore<NoteSnapshot, NoteEvent, NoteBoard.Command>
private typealias ServerCore = EventServerStateMachine<NoteBoard>

/// One request of the client on its way: not yet at the server, parked there, or with an answer on its way back.
private enum Exchange {
  case register
  case poll(EventFinger, dontBlock: Bool, deadline: Timestamp)
  case submit(MutationRequest<NoteBoard.Command>)
}

private enum Progress {
  case toServer
  case parked(PollID)
  case answered(Answer)
}

private enum Answer {
  case registered(Registration<NoteSnapshot>)
  case events([EventEnvelope<NoteEvent>])
  case receipt(MutationReceipt)
  case failed(TransportError)
}

private struct Outstanding {
  var exchange: Exchange
  var progress: Progress
}

private final class FailureBox {
  var failure: String?
}

private struct ClientWorld {
  static let alice: UserID = "alice"

  var random: SeededRandomNumberGenerator
  var now = Timestamp(secondsSinceEpoch: 1_700_000_000)
  var server: ServerCore
  var client: ClientCore
  var disk: PersistedRecord<NoteSnapshot, NoteBoard.Command>?
  var outstanding: [ClientCore.RequestID: Outstanding] = [:]
  var parked: [PollID: ClientCore.RequestID] = [:]
  var nextPollID: UInt64 = 0
  var noteCount = 0
  var durableMutations: Set<String> = []
  var trace: [String] = []
  let failureBox = FailureBox()
  var failure: String? { failureBox.failure }
  var faultsOn = true

  init(seed: UInt64) {
    random = SeededRandomNumberGenerator(seed: seed)
    server = ServerCore(application: NoteBoard(), random: SeededRandomNumberGenerator(seed: seed ^ 0xABCD), now: now)
    client = ClientWorld.makeClient(seed: seed, lifecycle: .foreground)
    perform(client.loaded(nil, now: now))
  }

  static func makeClient(seed: UInt64, lifecycle: AppLifecycle) -> ClientCore {
    var configuration = UpdateMachineConfiguration()
    configuration.backgroundPollInterval = .seconds(120)
    return ClientCore(
      reducer: NotesReducer(user: alice),
      configuration: configuration,
      lifecycle: lifecycle,
      random: SeededRandomNumberGenerator(seed: seed)
    )
  }

  func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition && failureBox.failure == nil { failureBox.failure = message() }
  }

  // MARK: Performing the client's actions

  /// Performs actions in order; with faults on, the client may crash between any two of them.
  mutating func perform(_ actions: [ClientCore.Action]) {
    for action in actions {
      if faultsOn && Int.random(in: 0..<100, using: &random) < 2 {
        trace.append("\(now) client crashes before \(action)")
        crashClient()
        return
      }
      defer {
        if faultsOn, Int.random(in: 0..<100, using: &random) < 30 {
          switch action {
          case .register(let request, _, _), .poll(let request, _, _, _), .submit(let request, _, _):
            deliverToServer(request)
          case .cancel, .persist:
            break
          }
        }
      }
      switch action {
      case .register(let request, _, _):
        outstanding[request] = Outstanding(exchange: .register, progress: .toServer)
      case .poll(let request, let finger, let dontBlock, let timeout):
        outstanding[request] = Outstanding(
          exchange: .poll(finger, dontBlock: dontBlock, deadline: now.advanced(by: timeout)),
          progress: .toServer
        )
      case .submit(let request, let body, _):
        outstanding[request] = Outstanding(exchange: .submit(body), progress: .toServer)
      case .cancel(let request):
        drop(request)
      case .persist(let record):
        do {
          disk = try PersistedRecord.decode(try record.encoded())
          for entry in record.outbox { if case .post(let text, _) = entry.mutation { durableMutations.insert(text) } }
        } catch {
          check(false, "persist round trip failed: \(error)")
        }
      }
    }
  }

  /// Forgets a request, cancelling its parked poll on the server.
  mutating func drop(_ request: ClientCore.RequestID) {
    guard let entry = outstanding.removeValue(forKey: request) else { return }
    if case .parked(let pollID) = entry.progress {
      parked[pollID] = nil
      applyServer(server.pollCancelled(pollID, now: now))
    }
  }

  mutating func crashClient() {
    for request in outstanding.keys.sorted() { drop(request) }
    let lifecycle: AppLifecycle = Bool.random(using: &random) ? .foreground : .background
    client = Self.makeClient(seed: random.next(), lifecycle: lifecycle)
    trace.append("\(now) client restarts in the \(lifecycle) from \(disk?.finger.map(\.description) ?? "no finger")")
    perform(client.loaded(disk, now: now))
  }

  /// Routes the server's poll completions back to the client's requests.
  mutating func applyServer(_ actions: [ServerCore.Action]) {
    for case .completePoll(let pollID, let outcome) in actions {
      guard let request = parked.removeValue(forKey: pollID) else { continue }
      switch outcome {
      case .events(let events): outstanding[request]?.progress = .answered(.events(events))
      case .failed(let error):
        check(
          error.code != .badRequest,
          "a poll was refused with BAD_REQUEST (\(error)): the client acknowledged what it had not persisted"
        )
        outstanding[request]?.progress = .answered(.failed(.api(error)))
      case .cancelled: outstanding[request]?.progress = .answered(.failed(.connectionFailed("dropped")))
      }
    }
  }

  // MARK: The network

  mutating func deliverToServer(_ request: ClientCore.RequestID) {
    guard let entry = outstanding[request], case .toServer = entry.progress else { return }
    switch entry.exchange {
    case .register:
      let (registration, actions) = server.register(user: Self.alice, eventTypes: nil, lifespan: nil, now: now)
      outstanding[request]!.progress = .answered(.registered(registration))
      applyServer(actions)
    case .poll(let finger, let dontBlock, _):
      let pollID = PollID(nextPollID)
      nextPollID += 1
      parked[pollID] = request
      outstanding[request]!.progress = .parked(pollID)
      applyServer(
        server.poll(
          pollID,
          queueID: finger.queueID,
          user: Self.alice,
          lastEventID: finger.lastEventID,
          dontBlock: dontBlock,
          now: now
        )
      )
    case .submit(let body):
      do {
        let (receipt, actions) = try server.applyMutation(
          body.mutation,
          from: Self.alice,
          clientID: body.clientID,
          mutationID: body.mutationID,
          now: now
        )
        outstanding[request]!.progress = .answered(.receipt(receipt))
        applyServer(actions)
      } catch {
        outstanding[request]!.progress = .answered(.failed(.api(error)))
      }
    }
    trace.append("\(now) \(request) reaches the server")
  }

  mutating func deliverToClient(_ request: ClientCore.RequestID) {
    guard let entry = outstanding[request], case .answered(let answer) = entry.progress else { return }
    outstanding[request] = nil
    trace.append("\(now) \(request) answered: \(String(describing: answer).prefix(120))")
    switch (entry.exchange, answer) {
    case (.register, .registered(let registration)): perform(client.registerSucceeded(request, registration, now: now))
    case (.register, .failed(let error)): perform(client.registerFailed(request, error, now: now))
    case (.poll, .events(let events)): perform(client.pollSucceeded(request, events, now: now))
    case (.poll, .failed(let error)): perform(client.pollFailed(request, error, now: now))
    case (.submit, .receipt(let receipt)): perform(client.submitSucceeded(request, receipt, now: now))
    case (.submit, .failed(let error)): perform(client.submitFailed(request, error, now: now))
    default: check(false, "answer \(answer) does not fit \(entry.exchange)")
    }
  }

  /// Fails a request: before it reaches the server, while parked, or by losing its answer.
  mutating func failRequest(_ request: ClientCore.RequestID) {
    guard let entry = outstanding[request] else { return }
    let error: TransportError = [
      .connectionFailed(), .timedOut, .serverError(status: 503), .api(.rateLimitHit(retryAfter: .seconds(2))),
      .api(.malformedResponse("garbled")),
    ].randomElement(using: &random)!
    if case .parked(let pollID) = entry.progress {
      parked[pollID] = nil
      applyServer(server.pollCancelled(pollID, now: now))
    }
    trace.append("\(now) \(request) fails with \(error)")
    outstanding[request] = nil
    switch entry.exchange {
    case .register: perform(client.registerFailed(request, error, now: now))
    case .poll: perform(client.pollFailed(request, error, now: now))
    case .submit: perform(client.submitFailed(request, error, now: now))
    }
  }

  mutating func advanceTime(to time: Timestamp) {
    now = max(now, time)
    applyServer(server.timerFired(now: now))
    for request in outstanding.keys.sorted() {
      if let entry = outstanding[request], case .poll(_, _, let deadline) = entry.exchange, deadline <= now {
        if case .answered = entry.progress { continue }
        if case .parked(let pollID) = entry.progress {
          parked[pollID] = nil
          applyServer(server.pollCancelled(pollID, now: now))
        }
        outstanding[request] = nil
        trace.append("\(now) \(request) times out")
        perform(client.pollFailed(request, .timedOut, now: now))
      }
    }
    perform(client.timerFired(now: now))
  }

  // MARK: Steps

  mutating func chaoticStep() {
    let requests = outstanding.keys.sorted()
    switch Int.random(in: 0..<100, using: &random) {
    case 0..<25:
      if let request = requests.filter({ if case .toServer = outstanding[$0]!.progress { true } else { false } })
        .randomElement(using: &random)
      {
        deliverToServer(request)
      }
    case 25..<47:
      if let request = requests.filter({ if case .answered = outstanding[$0]!.progress { true } else { false } })
        .randomElement(using: &random)
      {
        deliverToClient(request)
      }
    case 47..<54:
      if let request = requests.randomElement(using: &random) { failRequest(request) }
    case 54..<64:
      noteCount += 1
      let text = "n\(noteCount)"
      trace.append("\(now) bob posts \(text)")
      let recipients: [UserID] = Bool.random(using: &random) ? [Self.alice] : ["bob"]
      applyServer(try! server.handle(.post(text, to: recipients), from: "bob", now: now))
    case 64..<75:
      let step: Duration = [
        .milliseconds(50), .milliseconds(400), .seconds(2), .seconds(30), .seconds(61), .seconds(700),
      ]
      .randomElement(using: &random)!
      trace.append("\(now) time passes: \(step)")
      advanceTime(to: now.advanced(by: step))
    case 75..<80:
      trace.append("\(now) app goes to the \(client.lifecycle == .foreground ? "background" : "foreground")")
      perform(client.lifecycle == .foreground ? client.enteredBackground(now: now) : client.enteredForeground(now: now))
    case 80..<85:
      let queueID = client.phase.finger?.queueID
      let serverLast = queueID.flatMap { server.queues[$0]?.lastEventID }
      let hint = ClientCore.PushHint(queueID: queueID, lastEventID: Bool.random(using: &random) ? serverLast : nil)
      trace.append("\(now) push \(hint)")
      perform(client.pushReceived(hint, now: now))
    case 85..<93:
      guard client.isLoaded else { return }
      noteCount += 1
      let mutation: NoteBoard.Command =
        Int.random(in: 0..<8, using: &random) == 0 ? .forbidden : .post("m\(noteCount)", to: [Self.alice])
      trace.append("\(now) alice submits \(mutation)")
      perform(client.submit(mutation, now: now).1)
    case 93..<97:
      trace.append("\(now) client killed")
      crashClient()
    default:
      trace.append("\(now) server restarts")
      let dropped = server.connectionsDropped(now: now)
      applyServer(dropped)
      let dump = try! QueueDump<NoteEvent>.decode(WireFormat.encode(server.dump()))
      server = ServerCore(
        application: server.application,
        random: SeededRandomNumberGenerator(seed: random.next()),
        now: now
      )
      applyServer(try! server.restore(dump, now: now))
    }
  }

  /// The faults stop: everything is delivered, the app is in the foreground, and time moves only when
  /// nothing else can. The client must reach the server's state with an empty outbox.
  mutating func calmDown(maximumSteps: Int) {
    faultsOn = false
    trace.append("\(now) --- faults stop ---")
    if client.lifecycle == .background { perform(client.enteredForeground(now: now)) }
    for _ in 0..<maximumSteps {
      checkInvariants()
      if failure != nil { return }
      if isConverged { return }
      let requests = outstanding.keys.sorted()
      if let request = requests.first(where: { if case .answered = outstanding[$0]!.progress { true } else { false } })
      {
        deliverToClient(request)
      } else if let request = requests.first(where: {
        if case .toServer = outstanding[$0]!.progress { true } else { false }
      }) {
        deliverToServer(request)
      } else {
        let next =
          [client.nextWakeUp(after: now), server.nextDeadline].compactMap { $0 }.min() ?? now.advanced(by: .seconds(1))
        advanceTime(to: next)
      }
    }
    check(
      false,
      "did not converge within \(maximumSteps) calm steps: phase \(client.phase), outbox \(client.outbox.count), "
        + "client \(client.confirmedState?.notes ?? []), server \(server.application.notes[Self.alice] ?? [])"
    )
  }

  var isConverged: Bool {
    guard case .live(let finger) = client.phase, client.outbox.isEmpty, let queue = server.queues[finger.queueID],
      queue.lastEventID == finger.lastEventID
    else { return false }
    return client.confirmedState == server.application.snapshot(for: Self.alice)
      && client.displayedState == client.confirmedState
      && !outstanding.isEmpty
  }

  // MARK: Invariants

  func checkInvariants() {
    let serverNotes = server.application.notes[Self.alice] ?? []
    if let state = client.confirmedState {
      check(
        serverNotes.starts(with: state.notes),
        "client state \(state.notes) is not a prefix of the server's \(serverNotes)"
      )
    }
    if let disk {
      check(
        serverNotes.starts(with: disk.state.notes),
        "persisted state \(disk.state.notes) is not a prefix of \(serverNotes)"
      )
    }
    let counts = Dictionary(serverNotes.map { ($0, 1) }, uniquingKeysWith: +)
    check(counts.values.allSatisfy { $0 == 1 }, "a note was applied twice on the server: \(serverNotes)")
    if let finger = client.phase.finger, let queue = server.queues[finger.queueID] {
      check(finger.lastEventID <= queue.lastEventID, "finger \(finger) beyond the queue's last id \(queue.lastEventID)")
    }
    if client.freshness(now: now).freshness == .live {
      if case .live = client.phase {} else { check(false, "freshness live in phase \(client.phase)") }
    }
    if !faultsOn && isConverged {
      let rejected = Set(client.rejected.compactMap { if case .post(let text, _) = $0.mutation { text } else { nil } })
      for text in durableMutations where !rejected.contains(text) {
        check(counts[text] == 1, "durable mutation \(text) applied \(counts[text] ?? 0) times")
      }
    }
  }
}
