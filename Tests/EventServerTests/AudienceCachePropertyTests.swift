import EventProtocol
import Testing

@testable import EventServer

/// Deliveries to long recipient lists the application keeps (``AudienceCache``) reach exactly the queues a
/// fresh list would: random registrations, deletions, removals of queues over their limit and deliveries
/// to kept lists (naming some users twice) and to fresh copies of them, checked against a model after every
/// step. A resolution used after the queues changed would deliver to a queue removed since, miss a queue
/// registered since, or deliver into a slot another user's queue took over.
@Suite("Audience cache")
struct AudienceCachePropertyTests {
  @Test("kept lists reach exactly the queues of their users", arguments: 0..<40 as Range<UInt64>)
  func keptListsMatchTheModel(seed: UInt64) throws {
    var random = SeededRandomNumberGenerator(seed: seed)
    var configuration = EventServerConfiguration()
    configuration.maximumQueuesPerUser = 3
    configuration.maximumEventsPerQueue = 40
    var server = EventServerStateMachine(
      application: ListBoard(),
      configuration: configuration,
      random: SeededRandomNumberGenerator(seed: seed),
      now: t0
    )
    /// What each live queue should hold: its user and the events it received and did not acknowledge.
    var model: [QueueID: (user: UserID, events: [Int])] = [:]
    var sent = 0
    for step in 0..<300 {
      switch Int.random(in: 0..<10, using: &random) {
      case 0..<3:
        let user = ListBoard.users.randomElement(using: &random)!
        let (registration, _) = server.register(user: user, eventTypes: nil, lifespan: nil, now: t0)
        model[registration.queueID] = (user, [])
        // The oldest queue of a user over the limit is removed.
        let live = Set(server.queueIDs(of: user))
        for id in model.keys where model[id]!.user == user && !live.contains(id) { model[id] = nil }
      case 3:
        guard let id = model.keys.sorted().randomElement(using: &random) else { continue }
        _ = try server.deleteQueue(id, user: model[id]!.user, now: t0)
        model[id] = nil
      case 4:
        // A poll acknowledging everything: the queue's events are dropped.
        guard let id = model.keys.sorted().randomElement(using: &random) else { continue }
        let last = server.queue(id)!.nextEventID - 1
        _ = server.poll(
          PollID(UInt64(step)),
          queueID: id,
          user: model[id]!.user,
          lastEventID: last,
          dontBlock: true,
          now: t0
        )
        model[id]!.events = []
      default:
        let list = Int.random(in: 0..<ListBoard.lists.count, using: &random)
        let kept = Bool.random(using: &random)
        _ = try server.handle(.send(list: list, index: sent, kept: kept), from: "sender", now: t0)
        let recipients = Set(ListBoard.lists[list])
        for id in model.keys.sorted() where recipients.contains(model[id]!.user) {
          if model[id]!.events.count == configuration.maximumEventsPerQueue {
            model[id] = nil  // over its limit: removed
          } else {
            model[id]!.events.append(sent)
          }
        }
        sent += 1
      }
      for (id, expected) in model {
        let held = server.queue(id).map { queue in
          queue.events.compactMap { envelope -> Int? in
            guard case .payload(let numbered) = envelope.body else { return nil }
            return numbered.index
          }
        }
        #expect(held == expected.events, "seed \(seed), step \(step): queue of \(expected.user)")
        if held != expected.events { return }
      }
      let serverQueues = Set(ListBoard.users.flatMap { server.queueIDs(of: $0) })
      #expect(serverQueues == Set(model.keys), "seed \(seed), step \(step): the live queues")
    }
  }
}

@Suite("Audience cache entries")
struct AudienceCacheTests {
  let users: [UserID] = (0..<40).map { UserID("user\($0)") }

  @Test("a list is found by the array it was kept from, not by an equal copy")
  func foundByIdentity() {
    var cache = AudienceCache()
    let kept = users
    cache.keep([1, 2, 3], for: kept)
    #expect(cache.slots(for: kept) == [1, 2, 3])
    let copy = users.map { $0 }
    #expect(copy == kept)
    #expect(cache.slots(for: copy) == nil)
    #expect(cache.slots(for: Array(users.prefix(10))) == nil, "short lists are never kept")
    cache.removeAll()
    #expect(cache.slots(for: kept) == nil)
  }

  @Test("lists built afresh for every event do not push out a list sent to again")
  func freshListsChurnAlone() {
    var cache = AudienceCache()
    let kept = users
    cache.keep([7], for: kept)
    #expect(cache.slots(for: kept) == [7])
    for round in 0..<(AudienceCache.capacity * 3) {
      let fresh = users.map { $0 }
      #expect(cache.slots(for: fresh) == nil)
      cache.keep([round], for: fresh)
      #expect(cache.slots(for: kept) == [7], "round \(round)")
    }
  }
}

/// Sends numbered events to one of a few long recipient lists it keeps, or to a fresh copy of one.
private struct ListBoard: ServerApplication {
  struct Snapshot: Codable, Sendable, Equatable {}

  enum Command: Codable, Sendable {
    case send(list: Int, index: Int, kept: Bool)
  }

  struct Numbered: EventPayload, Hashable {
    static let knownEventTypes: Set<String> = ["numbered"]
    var eventType: String { "numbered" }
    var index: Int
  }

  static let users: [UserID] = (0..<48).map { UserID("user\($0)") }
  /// Lists of 32 and more (resolved through the cache), some naming users twice.
  static let lists: [[UserID]] = [
    users,
    Array(users[0..<32]) + Array(users[0..<4]),
    Array(users[16..<48].reversed()) + [users[20], users[20]],
  ]

  func snapshot(for user: UserID) -> Snapshot { Snapshot() }

  mutating func handle(_ command: Command, from user: UserID) throws(CommandRejection) -> [Delivery<Numbered>] {
    switch command {
    case .send(let list, let index, let kept):
      let recipients = kept ? Self.lists[list] : Self.lists[list].map { $0 }
      return [Delivery(to: recipients, event: Numbered(index: index))]
    }
  }
}
