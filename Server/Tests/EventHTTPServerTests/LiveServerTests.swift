import EventHTTPServer
import EventProtocol
import EventServer
import Foundation
import TestScheduling
import Testing
import UpdateMachine
import UpdateMachineTesting
import VideoMessaging

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The real client engine, through `URLSessionTransport`, against the HTTP server on 127.0.0.1.
@Suite("Live HTTP server: the engine over a real network", .serialized, .hangGuard)
struct LiveServerTests {
  @Test("register, a parked poll woken by another user's write, and the write's own status coming back")
  func parkedPollWoken() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let alice = makeMachine(live.transport("alice"))
    let bob = makeMachine(live.transport("bob"))
    await alice.start()
    await bob.start()
    await waitFor(alice, isPolling)
    await waitFor(bob, isPolling)
    try await live.events.waitForParkedPolls(count: 2)
    _ = await alice.submit(upload("v1", to: "bob"))
    let incoming = await waitFor(bob) { $0.confirmedState?.incoming.map(\.id) == ["v1"] }
    #expect(incoming?.metrics.registers == 1)
    let sent = await waitFor(alice) { $0.pendingMutations.isEmpty && $0.confirmedState?.outgoing.count == 1 }
    #expect(sent?.confirmedState?.outgoing.first?.status == .uploaded)
    await alice.stop()
    await bob.stop()
    try await live.stop()
  }

  @Test("a wrong API key stops the machine as unauthorized at once, though event-server sends a Basic challenge")
  func wrongKeyIsUnauthorized() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let transport = VideoTransport(baseURL: live.url, credentials: .init(user: "alice", apiKey: "not-alices-key"))
    let machine = makeMachine(transport)
    await machine.start()
    let stopped = await waitFor(machine) { $0.stopReason != nil }
    guard case .unauthorized(let message)? = stopped?.stopReason else {
      Issue.record("not stopped as unauthorized: \(String(describing: stopped?.stopReason))")
      return
    }
    #expect(!message.isEmpty)
    #expect(stopped?.metrics.registers == 1)
    await machine.stop()
    try await live.stop()
  }

  @Test("server_settings answers Zulip's fields; without a push gateway, push notifications are off")
  func serverSettings() async throws {
    let live = try await LiveServer.start()
    let settings = try await RawHTTP(base: live.url).send(
      "GET",
      "api/v1/server_settings",
      as: "alice",
      key: testKeyByUser["alice"]
    )
    #expect(settings.status == 200)
    #expect(settings.text.contains(#""push_notifications_enabled":false"#))
    #expect(settings.text.contains(#""zulip_feature_level":0"#))
    try await live.stop()
  }

  @Test("a heartbeat ends a parked poll with a real event, and the machine polls again")
  func heartbeat() async throws {
    let live = try await LiveServer.start { configuration in
      configuration.eventServer.heartbeatMinimum = .milliseconds(200)
      configuration.eventServer.heartbeatMaximum = .milliseconds(200)
    }
    defer { live.removeData() }
    let alice = makeMachine(live.transport("alice"))
    await alice.start()
    let after = await waitFor(alice) { $0.metrics.polls >= 4 }
    #expect(after?.metrics.failures == 0)
    #expect(after?.metrics.registers == 1)
    await alice.stop()
    try await live.stop()
  }

  @Test("a client that drops its connection has its parked poll cancelled at once, not at the heartbeat")
  func droppedConnection() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let transport = live.transport("alice")
    let registration = try await transport.register(eventTypes: nil, lifespan: nil, clientID: "c1")
    let poll = Task {
      try await transport.poll(
        after: EventFinger(queueID: registration.queueID, lastEventID: -1),
        dontBlock: false,
        limit: nil
      )
    }
    let events = try live.events
    await events.waitForParkedPolls(count: 1)
    poll.cancel()
    _ = try? await poll.value
    // The server notices the closed connection; nothing else ends the poll for 45 s.
    while await events.parkedPollCount > 0 { await Task.yield() }
    #expect(await events.queue(registration.queueID)?.events.isEmpty == true)
    try await live.stop()
  }

  @Test("a server restart from its dump: clients resume with no re-register, and the connection failure heals")
  func restartFromDump() async throws {
    let first = try await LiveServer.start()
    defer { first.removeData() }
    let alice = makeMachine(first.transport("alice"))
    let bob = makeMachine(first.transport("bob"))
    await alice.start()
    await bob.start()
    await waitFor(alice, isPolling)
    await waitFor(bob, isPolling)
    _ = await alice.submit(upload("v1", to: "bob"))
    await waitFor(bob) { $0.confirmedState?.incoming.count == 1 }
    try await first.stop()
    // While it is down, a write waits in the outbox.
    _ = await alice.submit(upload("v2", to: "bob"))
    await waitFor(alice) { $0.metrics.failures > 0 }

    let second = try await LiveServer.start(dataDirectory: first.dataDirectory, port: first.port)
    let resumed = await waitFor(bob) { $0.confirmedState?.incoming.map(\.id.rawValue) == ["v1", "v2"] }
    #expect(resumed?.metrics.registers == 1)
    let aliceAfter = await waitFor(alice) { $0.pendingMutations.isEmpty && $0.confirmedState?.outgoing.count == 2 }
    #expect(aliceAfter?.metrics.registers == 1)
    #expect(try await second.events.application.videos.count == 2)
    await alice.stop()
    await bob.stop()
    try await second.stop()
  }

  @Test("a rate limit answers 429 with Retry-After, and the machine waits and carries on")
  func rateLimitHonoured() async throws {
    let live = try await LiveServer.start { configuration in
      configuration.rateLimit = RateLimiter.Policy(burst: 3, perSecond: 4)
    }
    defer { live.removeData() }
    let transport = live.transport("alice")
    var limited: TransportError?
    for _ in 0..<5 {
      do {
        _ = try await transport.register(eventTypes: nil, lifespan: nil, clientID: nil)
      } catch {
        limited = error
        break
      }
    }
    guard case .api(let apiError)? = limited?.kind else {
      Issue.record("no rate limit after a burst: \(String(describing: limited))")
      return
    }
    #expect(apiError.code == .rateLimitHit)
    // The body carries the exact wait (a token every 0.25 s); the Retry-After header rounds it up to 1 s.
    #expect(apiError.retryAfter.map { $0 > .zero && $0 <= .milliseconds(250) } == true)

    let alice = makeMachine(live.transport("alice"))
    await alice.start()
    for index in 0..<6 { _ = await alice.submit(upload("r\(index)", to: "bob")) }
    let done = await waitFor(alice) { $0.pendingMutations.isEmpty && $0.confirmedState?.outgoing.count == 6 }
    #expect((done?.metrics.failures ?? 0) > 0)
    #expect(try await live.events.application.videos.count == 6)
    await alice.stop()
    try await live.stop()
  }

  @Test("a mutation whose answer is lost is sent again and applied once")
  func mutationAppliedOnce() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let lossy = FaultInjectingTransport(live.transport("alice"), plan: FaultPlan(seed: 1), clock: ContinuousClock())
    let alice = makeMachine(lossy)
    await alice.start()
    await waitFor(alice, isPolling)
    // The long-poll is on the server: the next request is the write.
    try await live.events.waitForParkedPolls(count: 1)
    lossy.scriptNext(.loseAnswer)
    _ = await alice.submit(upload("once", to: "bob"))
    let done = await waitFor(alice) { $0.pendingMutations.isEmpty && $0.confirmedState?.outgoing.count == 1 }
    #expect(done?.confirmedState?.outgoing.map(\.id.rawValue) == ["once"])
    let trace = lossy.trace
    #expect(trace.contains { $0.hasPrefix("submit") && $0.contains("loseAnswer") }, "\(trace)")
    let server = try await live.events.application
    #expect(server.videos.count == 1)
    #expect(server.droppedCommands.isEmpty)
    await alice.stop()
    try await live.stop()
  }

  @Test("a batch of writes over HTTP: decided in order, a refusal refuses its own write, a repeat applies nothing")
  func batchOverHTTP() async throws {
    let live = try await LiveServer.start()
    defer { live.removeData() }
    let transport = live.transport("alice")
    let commands: [VideoCommand] = [
      upload("b1", to: "bob"), upload("bad", to: "bob", size: -1), upload("b2", to: "bob"),
    ]
    let batch = MutationBatch(
      requests: commands.enumerated().map {
        MutationRequest(clientID: "c1", mutationID: MutationID(UInt64($0.offset + 1)), mutation: $0.element)
      }
    )
    let outcomes = try await transport.submit(batch, queueID: nil)
    #expect(outcomes.map(\.mutationID) == [MutationID(1), MutationID(2), MutationID(3)])
    #expect(
      outcomes.map { if case .acknowledged(_, let receipt) = $0 { receipt.applied } else { false } } == [
        true, false, true,
      ]
    )
    guard case .refused(_, let refusal) = outcomes[1] else {
      Issue.record("the second write was not refused: \(outcomes)")
      return
    }
    #expect(refusal.code == .badRequest)
    let again = try await transport.submit(batch, queueID: nil)
    #expect(again.count == 3)
    #expect(again.allSatisfy { if case .acknowledged(_, let receipt) = $0 { !receipt.applied } else { true } })
    #expect(try await live.events.application.videos.keys.map(\.rawValue).sorted() == ["b1", "b2"])
    try await live.stop()
  }

  @Test("a shutdown answers 500 parked polls at once, then drains and writes the state")
  func shutdownReleasesParkedPolls() async throws {
    let live = try await LiveServer.start { configuration in
      configuration.rateLimit = RateLimiter.Policy(burst: 2_000, perSecond: 1_000)
      configuration.eventServer.maximumQueuesPerUser = 500
      // No poll is answered by a heartbeat however long the 500 take to park (minutes under ThreadSanitizer
      // on a loaded machine): a poll answered with nothing was answered by the shutdown.
      configuration.eventServer.heartbeatMinimum = .seconds(3_600)
      configuration.eventServer.heartbeatMaximum = .seconds(3_600)
      // 500 connections open at once from one address, before any of them has authenticated.
      configuration.connections.maximumUnauthenticatedPerPeer = 600
      // And one user holding them all: a parked poll per queue, each on its own connection, beside the
      // connections the registrations left open (the per-user cap would otherwise close the oldest of them,
      // parked polls included).
      configuration.connections.maximumConnectionsPerUser = 5_000
      // Under ThreadSanitizer 500 connections opened at once can wait more than the default 10 s for their
      // request to be admitted; this test is about the shutdown, not about idle connections.
      configuration.connections.unauthenticatedTimeout = .seconds(120)
    }
    defer { live.removeData() }
    let transport = live.transport("alice", maximumConnections: 600, longPollTimeout: .seconds(3_600))
    var registered: [QueueID] = []
    for _ in 0..<500 {
      registered.append(try await transport.register(eventTypes: nil, lifespan: nil, clientID: nil).queueID)
    }
    let queues = registered
    // Each poll's end, as it happens: one that ends before the shutdown fails the test at once instead of
    // leaving the wait for 500 parked polls to hang.
    let (ends, ended) = AsyncStream.makeStream(of: String.self)
    let polls = queues.map { queue in
      Task { () -> Int in
        do {
          let count = try await transport.poll(
            after: EventFinger(queueID: queue, lastEventID: -1),
            dontBlock: false,
            limit: nil
          ).count
          ended.yield("\(queue) answered with \(count) events")
          return count
        } catch {
          ended.yield("\(queue) failed: \(error)")
          return -1
        }
      }
    }
    let events = try live.events
    let endedEarly = await withTaskGroup(of: String?.self) { group in
      group.addTask {
        await events.waitForParkedPolls(count: 500)
        return nil
      }
      group.addTask {
        var iterator = ends.makeAsyncIterator()
        return await iterator.next()
      }
      let first = await group.next() ?? nil
      group.cancelAll()
      return first
    }
    guard endedEarly == nil else {
      Issue.record("a poll ended before the shutdown: \(endedEarly ?? "")")
      for poll in polls { poll.cancel() }
      try await live.stop()
      return
    }
    try await live.stop()
    var answeredEmpty = 0
    for poll in polls where await poll.value == 0 { answeredEmpty += 1 }
    ended.finish()
    #expect(answeredEmpty == 500)
    #expect(
      FileManager.default.fileExists(atPath: live.dataDirectory.appendingPathComponent("event-server.sqlite").path)
    )
  }
}
