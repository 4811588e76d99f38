import EventProtocol
import Foundation
import SampleApps
import TestScheduling
import Testing

@testable import EventServer

private typealias Envelope = EventEnvelope<NoteBoard.Event>

private func envelope(_ id: Int) -> Envelope {
  EventEnvelope(id: id, body: .heartbeat)
}

/// A queue's backlog against the obvious model (an array the acknowledged events are removed from), on
/// random runs of appends, acknowledgements and bounded reads; and the queue's answers and dumps over it.
@Suite("EventBacklog: acknowledging costs what it drops, and the events are exactly the model's")
struct EventBacklogTests {
  @Test("random appends, acknowledgements and reads agree with an array model", .cpuBound, arguments: 0..<200)
  func againstModel(seed: UInt64) {
    var random = SeededRandomNumberGenerator(seed: seed)
    var backlog = EventBacklog<Envelope>()
    var model: [Envelope] = []
    var nextID = 0
    var acknowledged = -1
    for step in 0..<400 {
      switch Int.random(in: 0..<10, using: &random) {
      case 0..<5:
        // Ids increase with gaps, as a queue's do when events are filtered out or ids were skipped.
        nextID += Int.random(in: 1...3, using: &random)
        backlog.append(envelope(nextID))
        model.append(envelope(nextID))
      case 5..<8:
        acknowledged = max(acknowledged, Int.random(in: (acknowledged - 2)...(nextID + 1), using: &random))
        backlog.removeThrough(acknowledged)
        model.removeAll { $0.id <= acknowledged }
      default:
        let limit: Int? = Bool.random(using: &random) ? nil : Int.random(in: 0...6, using: &random)
        let expected = limit.map { Array(model.prefix(max($0, 1))) } ?? model
        #expect(backlog.prefix(limit) == expected, "seed \(seed) step \(step): prefix(\(String(describing: limit)))")
      }
      #expect(backlog.array == model, "seed \(seed) step \(step)")
      #expect(backlog.count == model.count && backlog.isEmpty == model.isEmpty, "seed \(seed) step \(step)")
      #expect(backlog == EventBacklog(model), "seed \(seed) step \(step): equal to a fresh backlog of the same events")
    }
  }

  @Test("a queue drained in polls of 1,000 answers every event once, in order, and dumps what is left")
  func queueDrain() throws {
    var machine = makeMachine { $0.maximumEventsPerQueue = 5_001 }
    let queue = machine.register(user: alice, eventTypes: nil, lifespan: nil, now: t0).0.queueID
    for index in 0..<5_000 { _ = try machine.handle(.post("n\(index)", to: [alice]), from: alice, now: t0) }
    var lastEventID = -1
    for pollID in 1...3 {
      let actions = machine.poll(
        PollID(UInt64(pollID)),
        queueID: queue,
        user: alice,
        lastEventID: lastEventID,
        dontBlock: true,
        limit: 1_000,
        now: t0
      )
      guard case .completePoll(_, .events(let batch))? = actions.last else {
        Issue.record("no answer after \(lastEventID): \(actions)")
        return
      }
      #expect(batch.map(\.id) == Array((lastEventID + 1)...(lastEventID + 1_000)))
      lastEventID += 1_000
    }
    _ = machine.poll(PollID(4), queueID: queue, user: alice, lastEventID: lastEventID, dontBlock: true, now: t0)
    let held = try #require(machine.queue(queue))
    #expect(held.events.map(\.id) == Array(3_000..<5_000))
    let dumped = try JSONDecoder().decode(EventQueue<NoteBoard.Event>.self, from: JSONEncoder().encode(held))
    #expect(dumped == held)
    #expect(dumped.events.map(\.id) == Array(3_000..<5_000))
  }
}
