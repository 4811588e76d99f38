import EventProtocol
import Foundation
import SampleApps
import Testing

@testable import EventServer

private let phone: ClientID = "phone"
private let tablet: ClientID = "tablet"

/// The pushes among `actions`, decoded.
private func pushes(_ actions: [Machine.Action]) -> [(MutationSource, PushPayload<NoteEvent>)] {
  actions.compactMap { action in
    guard case .sendPush(let push) = action else { return nil }
    return (push.installation, try! JSONDecoder().decode(PushPayload<NoteEvent>.self, from: Data(push.payload)))
  }
}

@Suite("EventServer: push notifications")
struct PushTests {
  @Test("an installation that is not long-polling gets a push with its queue, latest id and events")
  func pushWithEvents() throws {
    var machine = makeMachine()
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, clientID: phone, now: t0).0.queueID
    try machine.registerPushToken("apns-phone", user: alice, clientID: phone, now: t0)
    let actions = try machine.handle(.post("hi", to: [alice]), from: bob, now: t0)
    let sent = pushes(actions)
    #expect(sent.count == 1)
    #expect(sent.first?.0 == MutationSource(user: alice, clientID: phone))
    #expect(
      sent.first?.1
        == PushPayload(
          queueID: queue,
          lastEventID: 0,
          events: [EventEnvelope(id: 0, body: .payload(.note(text: "hi")))]
        )
    )
    guard case .sendPush(let push) = actions.first(where: { if case .sendPush = $0 { true } else { false } }) else {
      return
    }
    #expect(push.token == "apns-phone")
  }

  @Test("an installation long-polling when the event arrives gets no push; another installation does")
  func noPushWhileLongPolling() throws {
    var machine = makeMachine()
    let phoneQueue = machine.register(user: alice, eventTypes: nil, lifespan: nil, clientID: phone, now: t0).0.queueID
    _ = machine.register(user: alice, eventTypes: nil, lifespan: nil, clientID: tablet, now: t0)
    try machine.registerPushToken("p", user: alice, clientID: phone, now: t0)
    try machine.registerPushToken("t", user: alice, clientID: tablet, now: t0)
    _ = machine.poll(PollID(1), queueID: phoneQueue, user: alice, lastEventID: -1, dontBlock: false, now: t0)
    let actions = try machine.handle(.post("hi", to: [alice]), from: bob, now: t0)
    #expect(pushes(actions).map(\.0.clientID) == [tablet])
  }

  @Test("pushes are coalesced: one per interval, the deferred one composed when sent, up to date")
  func coalescing() throws {
    var machine = makeMachine { $0.pushInterval = .seconds(10) }
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, clientID: phone, now: t0).0.queueID
    try machine.registerPushToken("p", user: alice, clientID: phone, now: t0)
    #expect(pushes(try machine.handle(.post("one", to: [alice]), from: bob, now: t0)).count == 1)
    let later = t0.advanced(by: .seconds(3))
    #expect(pushes(try machine.handle(.post("two", to: [alice]), from: bob, now: later)).isEmpty)
    #expect(pushes(try machine.handle(.post("three", to: [alice]), from: bob, now: later)).isEmpty)
    #expect(machine.nextDeadline == t0.advanced(by: .seconds(10)))
    let due = pushes(machine.timerFired(now: t0.advanced(by: .seconds(10))))
    #expect(due.count == 1)
    #expect(due.first?.1.lastEventID == 2)
    #expect(due.first?.1.queueID == queue)
    #expect(due.first?.1.events?.count == 3)
    #expect(pushes(machine.timerFired(now: t0.advanced(by: .seconds(20)))).isEmpty)
  }

  @Test("events over the payload limit are left out, the hint remains")
  func payloadLimit() throws {
    var machine = makeMachine { $0.maximumPushPayloadBytes = 200 }
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, clientID: phone, now: t0).0.queueID
    try machine.registerPushToken("p", user: alice, clientID: phone, now: t0)
    let sent = pushes(try machine.handle(.post(String(repeating: "x", count: 300), to: [alice]), from: bob, now: t0))
    #expect(sent.first?.1 == PushPayload(queueID: queue, lastEventID: 0, events: nil))
  }

  @Test("a phone whose queue expired a week ago still hears about a new event: a bare hint wakes it to register")
  func expiredQueueStillPushed() throws {
    var machine = makeMachine()
    _ = machine.register(user: alice, eventTypes: nil, lifespan: nil, clientID: phone, now: t0)
    try machine.registerPushToken("p", user: alice, clientID: phone, now: t0)
    let aWeekLater = t0.advanced(by: .seconds(7 * 24 * 3600))
    _ = machine.timerFired(now: aWeekLater)
    #expect(machine.queues.isEmpty)
    let sent = pushes(try machine.handle(.post("new video", to: [alice]), from: bob, now: aWeekLater))
    #expect(sent.first?.1 == PushPayload(queueID: nil, lastEventID: nil, events: nil))
  }

  @Test("a token the platform reports invalid gets no more pushes; registrations survive a restart")
  func invalidTokensAndDumps() throws {
    var machine = makeMachine()
    try machine.registerPushToken("p", user: alice, clientID: phone, now: t0)
    try machine.registerPushToken("t", user: alice, clientID: tablet, now: t0)
    machine.pushTokenInvalid("p", now: t0)
    #expect(pushes(try machine.handle(.post("x", to: [alice]), from: bob, now: t0)).map(\.0.clientID) == [tablet])
    let dump = try QueueDump<NoteEvent>.decode(WireFormat.encode(machine.dump()))
    var restarted = makeMachine()
    _ = try restarted.restore(dump, now: t0)
    #expect(
      restarted.pushRegistry.records == [
        PushRecord(installation: MutationSource(user: alice, clientID: tablet), token: "t")
      ]
    )
  }

  @Test("a token's platform reaches its pushes, the log's replay and the dump; a log entry without one still reads")
  func platforms() throws {
    var machine = makeMachine()
    machine.startRecording()
    try machine.registerPushToken("fcm-phone", platform: .fcm, user: alice, clientID: phone, now: t0)
    try machine.registerPushToken("apns-tablet", platform: .apns, user: alice, clientID: tablet, now: t0)
    let actions = try machine.handle(.post("hi", to: [alice]), from: bob, now: t0)
    let platforms = actions.compactMap { action -> PushPlatform? in
      guard case .sendPush(let push) = action else { return nil }
      return push.platform
    }
    #expect(platforms.sorted { $0.rawValue < $1.rawValue } == [.apns, .fcm])

    var replayed = makeMachine()
    for entry in machine.takeRecordedEntries() {
      replayed.replay(try JSONDecoder().decode(type(of: entry), from: JSONEncoder().encode(entry)))
    }
    #expect(replayed.pushRegistry.records == machine.pushRegistry.records)
    #expect(replayed.pushRegistry.records.map(\.platform) == [.fcm, .apns])
    let dump = try QueueDump<NoteEvent>.decode(WireFormat.encode(machine.dump()))
    #expect(dump.pushes.map(\.platform) == [.fcm, .apns])

    let before = Data(#"{"pushTokenRegistered":{"token":"old","user":"alice","clientID":"phone"}}"#.utf8)
    let input = try JSONDecoder().decode(ServerInput<NoteBoard.Command>.self, from: before)
    guard case .pushTokenRegistered(let token, _, _, let platform) = input else {
      Issue.record("read as \(input)")
      return
    }
    #expect(token == "old" && platform == nil)
  }

  @Test("the actor sends through its gateway, and drops a token the gateway reports invalid")
  func gateway() async throws {
    let gateway = InMemoryPushGateway()
    let server = EventServer(
      application: NoteBoard(),
      clock: ContinuousClock(),
      random: SeededRandomNumberGenerator(seed: 1),
      pushGateway: gateway
    )
    try await server.registerPushToken("p", user: alice, clientID: phone)
    try await server.handle(.post("x", to: [alice]), from: bob)
    await gateway.waitForPushes(count: 1)
    #expect(gateway.sent.map(\.token) == ["p"])
    await server.shutdown()
  }
}
