import EventProtocol
import Foundation
import SampleApps
import Synchronization
import Testing
import UpdateMachineTesting

@testable import EventServer

/// The results one `startPoll` callback was called with, in order.
private final class PollAnswers: Sendable {
  typealias Answer = Result<[EventEnvelope<NoteEvent>], any Error>
  private let answers = Mutex<[Answer]>([])
  private let stream: AsyncStream<Answer>
  private let continuation: AsyncStream<Answer>.Continuation

  init() {
    (stream, continuation) = AsyncStream.makeStream(of: Answer.self)
  }

  var callback: @Sendable (Answer) -> Void {
    { [self] answer in
      answers.withLock { $0.append(answer) }
      continuation.yield(answer)
    }
  }

  /// Every answer so far.
  var count: Int { answers.withLock { $0.count } }

  /// The next answer, once it comes.
  func next() async -> Answer? {
    var iterator = stream.makeAsyncIterator()
    return await iterator.next()
  }
}

/// `EventServer.startPoll`: the poll of `events(…)` answered through a callback, so that a parked poll holds
/// no task of its caller's (the lean HTTP poll listener).
@Suite("A poll answered through a callback")
struct StartPollTests {
  private func makeServer(clock: ManualClock) -> EventServer<NoteBoard, ManualClock> {
    EventServer(application: NoteBoard(), clock: clock, anchor: clock.now, random: SeededRandomNumberGenerator(seed: 9))
  }

  @Test("answered at once with queued events, parked until the next, and called exactly once each time")
  func answersAndParks() async throws {
    let server = makeServer(clock: ManualClock())
    let queue = try await server.register(user: alice).queueID
    try await server.handle(.post("one", to: [alice]), from: bob)
    let first = PollAnswers()
    await server.startPoll(queueID: queue, user: alice, lastEventID: -1, answer: first.callback)
    #expect(try await first.next()?.get().map(\.id) == [0])

    let second = PollAnswers()
    await server.startPoll(queueID: queue, user: alice, lastEventID: 0, answer: second.callback)
    await server.waitForParkedPolls(count: 1)
    #expect(second.count == 0)
    try await server.handle(.post("two", to: [alice]), from: bob)
    #expect(try await second.next()?.get().map(\.id) == [1])
    // Event 0 was acknowledged by the second poll; nothing is parked; a later event calls no old callback.
    try await server.handle(.post("three", to: [alice]), from: bob)
    #expect(try await server.events(queueID: queue, user: alice, lastEventID: 1, dontBlock: true).map(\.id) == [2])
    #expect(await server.parkedPollCount == 0)
    #expect(first.count == 1 && second.count == 1)
  }

  @Test("a cancelled poll gets CancellationError and its queue stays; another user's queue is refused")
  func cancelledAndRefused() async throws {
    let server = makeServer(clock: ManualClock())
    let queue = try await server.register(user: alice).queueID
    let parked = PollAnswers()
    let poll = await server.startPoll(queueID: queue, user: alice, lastEventID: -1, answer: parked.callback)
    await server.waitForParkedPolls(count: 1)
    await server.cancelPoll(poll)
    let cancelled = await parked.next()
    #expect(throws: CancellationError.self) { try cancelled?.get() }
    #expect(await server.parkedPollCount == 0)
    try await server.handle(.post("kept", to: [alice]), from: bob)
    #expect(try await server.events(queueID: queue, user: alice, lastEventID: -1, dontBlock: true).count == 1)
    #expect(parked.count == 1)

    let stolen = PollAnswers()
    await server.startPoll(queueID: queue, user: bob, lastEventID: -1, answer: stolen.callback)
    let refused = await stolen.next()
    #expect(throws: EventAPIError.self) { try refused?.get() }
  }

  @Test("the server's shutdown answers a parked poll with no events")
  func shutdownAnswersEmpty() async throws {
    let server = makeServer(clock: ManualClock())
    let queue = try await server.register(user: alice).queueID
    let parked = PollAnswers()
    await server.startPoll(queueID: queue, user: alice, lastEventID: -1, answer: parked.callback)
    await server.waitForParkedPolls(count: 1)
    await server.shutdown()
    #expect(try await parked.next()?.get().isEmpty == true)
  }

  @Test("a heartbeat answers a parked poll with its heartbeat event, as it answers events(…)")
  func heartbeat() async throws {
    let clock = ManualClock()
    let server = makeServer(clock: clock)
    let queue = try await server.register(user: alice).queueID
    let parked = PollAnswers()
    await server.startPoll(queueID: queue, user: alice, lastEventID: -1, answer: parked.callback)
    await server.waitForParkedPolls(count: 1)
    clock.advance(by: .seconds(60))
    let answer = try await parked.next()?.get()
    #expect(answer?.count == 1)
    #expect(answer?.first?.body == .heartbeat)
  }
}
