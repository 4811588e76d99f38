import EventProtocol
import Foundation
import Testing
import UpdateMachine

/// Version 1 of a to-do app: the state is a list of titles.
private struct ListV1: Codable, Sendable, Equatable {
  var titles: [String] = []
}

/// Version 2 of the same app: items with a done flag; old data no longer decodes.
private struct ListV2: Codable, Sendable, Equatable {
  struct Item: Codable, Sendable, Equatable {
    var title: String
    var done: Bool
  }
  var items: [Item] = []
}

private struct ItemAdded: EventPayload {
  static let knownEventTypes: Set<String> = ["item_added"]
  var eventType: String { "item_added" }
  var title: String
}

private struct ReducerV1: UpdateReducer {
  var initialState: ListV1 { ListV1() }
  func apply(_ event: ItemAdded, to state: inout ListV1) throws(ReducerError) { state.titles.append(event.title) }
  func applyOptimistically(_ mutation: String, to state: inout ListV1) { state.titles.append(mutation) }
}

private struct ReducerV2: UpdateReducer {
  var migrates: Bool
  var stateVersion: Int { 2 }
  var initialState: ListV2 { ListV2() }
  func apply(_ event: ItemAdded, to state: inout ListV2) throws(ReducerError) {
    state.items.append(.init(title: event.title, done: false))
  }
  func applyOptimistically(_ mutation: String, to state: inout ListV2) {
    state.items.append(.init(title: mutation, done: false))
  }
  func migrateState(from decoder: any Decoder, storedVersion: Int) throws -> ListV2? {
    guard migrates, storedVersion == 1 else { return nil }
    let old = try ListV1(from: decoder)
    return ListV2(items: old.titles.map { .init(title: $0, done: false) })
  }
}

/// A later version whose writes are a different type: the old outbox no longer decodes.
private enum CommandV3: Codable, Sendable, Equatable {
  case add(title: String, priority: Int)
}

private struct ReducerV3: UpdateReducer {
  var stateVersion: Int { 2 }
  var initialState: ListV2 { ListV2() }
  func apply(_ event: ItemAdded, to state: inout ListV2) throws(ReducerError) {}
  func applyOptimistically(_ mutation: CommandV3, to state: inout ListV2) {}
}

private let finger = EventFinger(queueID: "queue-a", lastEventID: 4)

/// A record as version 1 of the app saves it: a cached list, a finger, and a write made offline.
private func recordOfV1() throws -> Data {
  var core = UpdateMachineCore<ListV1, ItemAdded, String>(
    reducer: ReducerV1(),
    random: SeededRandomNumberGenerator(seed: 3)
  )
  _ = core.loaded(nil, now: t0)
  _ = core.registerSucceeded(
    RequestID(rawValue: 1),
    Registration(queueID: finger.queueID, lastEventID: 4, longPollTimeout: nil, snapshot: ListV1(titles: ["old"])),
    now: t0
  )
  _ = core.enteredBackground(now: t0)
  _ = core.submit("buy milk offline", now: t0)
  return try core.persistedRecord().encoded()
}

@Suite("Restoring a persisted record part by part")
struct RecordRestoreTests {
  @Test("an app update whose state no longer decodes starts stale, keeps the outbox, and sends it")
  func stateDiscardedOutboxKept() throws {
    let data = try recordOfV1()
    let restoration = PersistedRecord<ListV2, String>.restore(from: data, for: ReducerV2(migrates: false))
    #expect(!restoration.mustSetAside)
    let record = try #require(restoration.record)
    #expect(record.state == ListV2())
    #expect(record.finger == nil)
    #expect(record.outbox.map(\.mutation) == ["buy milk offline"])
    #expect(record.stateVersion == 2)
    guard case .stateDiscarded = restoration.notes.first, restoration.notes.count == 1 else {
      Issue.record("notes \(restoration.notes)")
      return
    }
    var core = UpdateMachineCore<ListV2, ItemAdded, String>(
      reducer: ReducerV2(migrates: false),
      random: SeededRandomNumberGenerator(seed: 1)
    )
    let actions = core.loaded(record, recovery: restoration.notes, now: t0)
    #expect(core.phase == .registering)
    #expect(core.displayedState == ListV2(items: [.init(title: "buy milk offline", done: false)]))
    #expect(core.storeRecovery == restoration.notes)
    guard case .persist(let rewritten, _) = actions.first else {
      Issue.record("the upgraded record is not saved first: \(actions)")
      return
    }
    let sent = actions + core.persistSucceeded(rewritten, now: t0)
    #expect(
      sent.contains {
        if case .submit(_, let body, _) = $0 { body.requests.map(\.mutation) == ["buy milk offline"] } else { false }
      }
    )
  }

  @Test("with a migration hook the cached state and the finger survive the update")
  func stateMigrated() throws {
    let restoration = PersistedRecord<ListV2, String>.restore(from: try recordOfV1(), for: ReducerV2(migrates: true))
    let record = try #require(restoration.record)
    #expect(record.state == ListV2(items: [.init(title: "old", done: false)]))
    #expect(record.finger == finger)
    #expect(record.outbox.map(\.mutation) == ["buy milk offline"])
    #expect(restoration.notes == [.stateMigrated(fromVersion: 1)])
    #expect(!restoration.mustSetAside)
  }

  @Test("an outbox that no longer decodes is set aside with the file and reported with its count")
  func outboxSetAside() throws {
    let restoration = PersistedRecord<ListV2, CommandV3>.restore(from: try recordOfV1(), for: ReducerV3())
    #expect(restoration.mustSetAside)
    let record = try #require(restoration.record)
    #expect(record.outbox.isEmpty)
    #expect(restoration.notes.contains { if case .setAside(_, nil, 1) = $0 { true } else { false } })
  }

  @Test("an intact record restores exactly, and a version-1 file (no stateVersion) still reads")
  func intactAndVersionOne() throws {
    let data = try recordOfV1()
    let restoration = PersistedRecord<ListV1, String>.restore(from: data, for: ReducerV1())
    #expect(restoration.record == (try PersistedRecord<ListV1, String>.decode(data)))
    #expect(restoration.notes.isEmpty && !restoration.mustSetAside)

    var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    object["version"] = 1
    object["stateVersion"] = nil
    let versionOne = try JSONSerialization.data(withJSONObject: object)
    let old = PersistedRecord<ListV1, String>.restore(from: versionOne, for: ReducerV1())
    #expect(old.record?.state == ListV1(titles: ["old"]))
    #expect(old.record?.outbox.count == 1)
  }

  @Test(
    "valid JSON with extreme values is unusable and set aside, never a trap",
    arguments: ["nextMutationID", "longPollTimeout", "queueLifetime", "lastContactAt", "finger", "clientID", "outbox"]
  )
  func extremeValues(field: String) throws {
    let data = try recordOfV1()
    var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    switch field {
    case "nextMutationID": object[field] = UInt64.max
    case "longPollTimeout", "queueLifetime": object[field] = [Int64.max, 0]
    case "lastContactAt": object[field] = ["sinceEpoch": [Int64.min, 0]]
    case "finger": object[field] = ["queueID": "q", "lastEventID": Int.min]
    case "clientID": object[field] = String(repeating: "x", count: 10_000)
    default: object[field] = [["id": 99, "mutation": "x", "submittedAt": ["sinceEpoch": [0, 0]], "attempts": -1]]
    }
    let hostile = try JSONSerialization.data(withJSONObject: object)
    let restoration = PersistedRecord<ListV1, String>.restore(from: hostile, for: ReducerV1())
    #expect(restoration.mustSetAside)
    if field == "outbox" {
      #expect(restoration.record?.outbox == [])
    } else {
      #expect(restoration.record == nil)
    }
    #expect(throws: PersistenceError.self) { try PersistedRecord<ListV1, String>.decode(hostile) }
  }

  @Test("the writes stranded in an unusable file are counted when its outbox can be read")
  func strandedCount() throws {
    let data = try recordOfV1()
    #expect(PersistedRecord<ListV1, String>.countWrites(in: data) == 1)
    #expect(PersistedRecord<ListV1, String>.countWrites(in: Data(#"{"version": 9, "outbox": [1, 2, 3]}"#.utf8)) == 3)
    #expect(PersistedRecord<ListV1, String>.countWrites(in: Data("{ torn".utf8)) == nil)
    let newer = PersistedRecord<ListV1, String>.restore(
      from: Data(#"{"version": 9, "outbox": [1, 2]}"#.utf8),
      for: ReducerV1()
    )
    #expect(newer.record == nil)
    guard case .setAside(let problem, nil, 2)? = newer.notes.first else {
      Issue.record("notes \(newer.notes)")
      return
    }
    #expect(problem.isSameKind(as: .newerVersion(found: 9, supported: 2)))
  }

  @Test("time arithmetic saturates instead of trapping")
  func saturatingTime() {
    #expect(Timestamp.distantFuture.advanced(by: .seconds(1)) == .distantFuture)
    #expect(Timestamp.distantPast.advanced(by: .seconds(-1)) == .distantPast)
    #expect(Timestamp.distantPast.duration(to: .distantFuture) == Duration(attoseconds: Int128.max))
    #expect(Timestamp.distantFuture.duration(to: .distantPast) == Duration(attoseconds: Int128.min))
    #expect(t0.advanced(by: .seconds(5)).duration(to: t0) == .seconds(-5))
  }

  @Test("a timestamp converts to and from a Date")
  func dates() {
    let date = Date(timeIntervalSince1970: 1_700_000_123.5)
    #expect(Timestamp(date) == Timestamp(sinceEpoch: .milliseconds(1_700_000_123_500)))
    #expect(Timestamp(date).date == date)
  }
}
