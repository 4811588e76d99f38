import EventProtocol
import Testing

@testable import EventServer

/// The expiry index names a queue by its slot and a 32-bit tag of its id (16 bytes an entry instead of 32):
/// a slot another queue took over must not inherit the old queue's entry, a tag shared by two ids must not
/// expire a queue twice, and a sweep expires exactly the queues whose idle time ran out.
@Suite("Expiry index")
struct ExpiryIndexTests {
  @Test("entries come out by deadline, then by slot, only once due", arguments: 0..<30 as Range<UInt64>)
  func heapOrder(seed: UInt64) {
    var random = SeededRandomNumberGenerator(seed: seed)
    var index = ExpiryIndex()
    var model: [(deadline: Int64, slot: Int)] = []
    var now: Int64 = 0
    for _ in 0..<400 {
      if Bool.random(using: &random) {
        let deadline = now + Int64.random(in: 0..<50, using: &random)
        let slot = Int.random(in: 0..<20, using: &random)
        index.file(slot: slot, tag: UInt32(slot), at: Timestamp(nanosecondsSinceEpoch: deadline))
        model.append((deadline, slot))
      } else {
        now += Int64.random(in: 0..<20, using: &random)
        model.sort { ($0.deadline, $0.slot) < ($1.deadline, $1.slot) }
        while let due = index.takeDue(at: Timestamp(nanosecondsSinceEpoch: now)) {
          let expected = model.removeFirst()
          #expect(expected.deadline <= now)
          #expect(due == ExpiryIndex.Due(slot: expected.slot, tag: UInt32(expected.slot)))
        }
        #expect(model.allSatisfy { $0.deadline > now })
      }
      #expect(index.count == model.count)
    }
  }

  @Test("a slot another queue took over drops the old queue's entry")
  func reusedSlot() {
    var store = QueueStore()
    // A queue that outlives the test keeps the index from being emptied when the first is removed.
    _ = store.insert(record("bystander", at: t0, idle: .seconds(60)), holding: HeldRuns())
    let first = store.insert(record("first-queue", at: t0), holding: HeldRuns())
    _ = store.remove(slot: first)
    let second = store.insert(record("second-queue", at: t0.advanced(by: .seconds(5))), holding: HeldRuns())
    #expect(second == first)
    #expect(store.expiryEntryCount == 3)
    // The first queue's deadline passes: its entry is dropped, not moved to the second queue.
    #expect(store.expired(at: t0.advanced(by: .seconds(11))).isEmpty)
    #expect(store.expiryEntryCount == 2)
    #expect(store.expired(at: t0.advanced(by: .seconds(15))) == [second])
  }

  @Test("two ids with one tag in one slot: the queue expires once, and only when its time is up")
  func sharedTag() throws {
    let (older, newer) = try #require(Self.idsSharingATag)
    var store = QueueStore()
    _ = store.insert(record("bystander", at: t0, idle: .seconds(60)), holding: HeldRuns())
    let slot = store.insert(record(older, at: t0), holding: HeldRuns())
    _ = store.remove(slot: slot)
    #expect(store.insert(record(newer, at: t0.advanced(by: .seconds(3))), holding: HeldRuns()) == slot)
    // The older queue's entry now reads as the newer queue's: looked at, found alive, filed again.
    #expect(store.expired(at: t0.advanced(by: .seconds(10))).isEmpty)
    #expect(store.expired(at: t0.advanced(by: .seconds(13))) == [slot])
  }

  @Test("sweeps expire exactly the queues whose idle time ran out", arguments: 0..<30 as Range<UInt64>)
  func sweepsMatchTheModel(seed: UInt64) throws {
    var random = SeededRandomNumberGenerator(seed: seed)
    let (older, newer) = try #require(Self.idsSharingATag)
    // A few ids, two of them sharing a tag, so that slots are reused by the same and by colliding ids.
    let ids = [older, newer] + (0..<6).map { QueueID(rawValue: "queue-\($0)") }
    var store = QueueStore()
    var now = t0
    /// Each live queue's deadline.
    var model: [QueueID: Timestamp] = [:]
    /// The deadlines of removed queues (their entries stay until then).
    var removedDeadlines: [Timestamp] = []
    /// How often an id sharing a tag with one inserted before (itself again, or its colliding twin) was
    /// inserted: each such queue may inherit the earlier one's entry.
    var collidingInserts = 0
    var insertedBefore: Set<UInt32> = []
    for _ in 0..<300 {
      switch Int.random(in: 0..<4, using: &random) {
      case 0:
        let id = ids.randomElement(using: &random)!
        guard model[id] == nil else { continue }
        let idle = Duration.seconds(Int.random(in: 1...20, using: &random))
        _ = store.insert(record(id, at: now, idle: idle), holding: HeldRuns())
        model[id] = now.advanced(by: idle)
        if !insertedBefore.insert(ExpiryIndex.tag(of: id)).inserted { collidingInserts += 1 }
      case 1:
        guard let id = model.keys.sorted().randomElement(using: &random) else { continue }
        _ = store.remove(slot: try #require(store.slot(of: id)))
        removedDeadlines.append(model[id]!)
        model[id] = nil
      case 2:
        guard let id = model.keys.sorted().randomElement(using: &random) else { continue }
        let slot = try #require(store.slot(of: id))
        store[slot: slot].lastContact = now
        model[id] = now.advanced(by: store[slot: slot].idleTimeout)
      default:
        now = now.advanced(by: .seconds(Int.random(in: 0...8, using: &random)))
        let expired = store.expired(at: now)
        #expect(expired == expired.sorted() && Set(expired).count == expired.count)
        let expiredIDs = Set(expired.map { store[slot: $0].id })
        #expect(expiredIDs == Set(model.filter { $0.value <= now }.keys))
        for slot in expired { model[store.remove(slot: slot).queue.id] = nil }
        // Stale entries go as they come due: what is left is one per live queue, one per removed queue not
        // yet due, and at most one more for each queue that inherited a colliding entry.
        removedDeadlines.removeAll { $0 <= now }
        #expect(store.expiryEntryCount <= model.count + removedDeadlines.count + collidingInserts)
      }
    }
    // Long after every deadline, every queue expires and no entry is left.
    let expired = store.expired(at: now.advanced(by: .seconds(60)))
    #expect(Set(expired.map { store[slot: $0].id }) == Set(model.keys))
    for slot in expired { _ = store.remove(slot: slot) }
    #expect(store.expiryEntryCount == 0)
  }

  private func record(_ id: QueueID, at now: Timestamp, idle: Duration = .seconds(10)) -> QueueRecord {
    QueueRecord(id: id, user: "alice", clientID: nil, eventTypes: nil, idleTimeout: idle, now: now)
  }

  /// Two queue ids whose tags are equal, found once by trying ids until two collide (about 80,000 tries).
  private static let idsSharingATag: (QueueID, QueueID)? = {
    var seen: [UInt32: QueueID] = [:]
    for number in 0..<1_000_000 {
      let id = QueueID(rawValue: "q\(number)")
      let tag = ExpiryIndex.tag(of: id)
      if let other = seen[tag] { return (other, id) }
      seen[tag] = id
    }
    return nil
  }()
}
