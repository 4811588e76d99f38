import EventProtocol
import Foundation
import SampleApps
import Synchronization
import TestScheduling
import Testing
import UpdateMachineTesting

@testable import UpdateMachine

/// A folder of its own for one test's store files.
private struct Folder {
  let url = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID())")
  var store: FileStore { FileStore(url: url.appendingPathComponent("record.json")) }

  func remove() { try? FileManager.default.removeItem(at: url) }
}

@Suite("Journaled saves: small appends after a whole record, torn tails dropped", .hangGuard)
struct JournalTests {
  let record = Data(#"{"version":2,"record":"the whole thing"}"#.utf8)
  let entries = (1...3).map { Data("entry \($0) \(String(repeating: "x", count: $0 * 7))".utf8) }

  @Test("entries appended after a whole save come back in order; a new whole save starts an empty journal")
  func appendAndLoad() throws {
    let folder = Folder()
    defer { folder.remove() }
    let store = folder.store
    #expect(try store.loadJournal(after: record) == nil)
    #expect(throws: PersistenceError.self) { try store.appendToJournal(entries[0]) }
    try store.save(record)
    #expect(try store.loadJournal(after: record) == [])
    for entry in entries { try store.appendToJournal(entry) }
    #expect(try store.loadJournal(after: record) == entries)
    let newer = Data(#"{"version":2,"record":"newer"}"#.utf8)
    try store.save(newer)
    #expect(try store.loadJournal(after: newer) == [])
  }

  @Test("a crash at any byte of an append keeps every entry before it, and later appends follow them")
  func tornTailAtEveryByte() throws {
    let folder = Folder()
    defer { folder.remove() }
    let store = folder.store
    try store.save(record)
    for entry in entries { try store.appendToJournal(entry) }
    let journal = try Data(contentsOf: store.journalURL)
    var frameEnds = [JournalFormat.headerLength]
    for entry in entries { frameEnds.append(frameEnds.last! + JournalFormat.frameHeaderLength + entry.count) }
    #expect(frameEnds.last == journal.count)
    for length in JournalFormat.headerLength...journal.count {
      try journal.prefix(length).write(to: store.journalURL)
      let complete = frameEnds.dropFirst().filter { $0 <= length }.count
      #expect(try store.loadJournal(after: record) == Array(entries.prefix(complete)), "cut at \(length)")
      #expect(try Data(contentsOf: store.journalURL).count == frameEnds[complete], "tail cut at \(length)")
      try store.appendToJournal(Data("after".utf8))
      #expect(try store.loadJournal(after: record) == Array(entries.prefix(complete)) + [Data("after".utf8)])
    }
  }

  @Test("a damaged entry ends the journal there; a journal of another record is never replayed")
  func damagedAndStale() throws {
    let folder = Folder()
    defer { folder.remove() }
    let store = folder.store
    try store.save(record)
    for entry in entries { try store.appendToJournal(entry) }
    var journal = try Data(contentsOf: store.journalURL)
    let secondPayload = JournalFormat.headerLength + 2 * JournalFormat.frameHeaderLength + entries[0].count
    journal[secondPayload] ^= 0x20
    try journal.write(to: store.journalURL)
    #expect(try store.loadJournal(after: record) == [entries[0]])

    // A crash after a new record's rename and before its new journal's: the old journal stays, unused.
    try store.appendToJournal(entries[1])
    let newer = Data(#"{"version":2,"record":"newer"}"#.utf8)
    try newer.write(to: store.url)
    #expect(try store.loadJournal(after: newer) == nil)
  }

  @Test("the in-memory store keeps a journal too, bound to its record")
  func inMemory() throws {
    let store = InMemoryStore()
    #expect(throws: PersistenceError.self) { try store.appendToJournal(entries[0]) }
    try store.save(record)
    try store.appendToJournal(entries[0])
    #expect(try store.loadJournal(after: record) == [entries[0]])
    #expect(try store.loadJournal(after: Data("other".utf8)) == nil)
    _ = try store.setAside(reason: "test")
    #expect(store.journal == nil)
  }

  @Test("a machine journals each batch, compacts once the journal outgrows the record, and restarts from both")
  func machineJournalsAndCompacts() async throws {
    let world = World()
    defer { world.cleanUp() }
    let logged = Mutex<[UpdateMachineLogEvent]>([])
    let first = world.makeMachine(log: { event in logged.withLock { $0.append(event) } })
    await first.start()
    await waitFor(first, isLive)
    // Each note is its own batch (the long-poll wakes per post); 64 KiB of entries force a compaction.
    let long = String(repeating: "n", count: 2_000)
    for index in 0..<40 {
      try await world.post("\(index) \(long)")
      await waitFor(first) { $0.confirmedState?.notes.count == index + 1 }
    }
    await first.stop()
    let events = logged.withLock { $0 }
    let journaled = events.filter { if case .journaled(_, 1) = $0 { true } else { false } }
    let wholeSaves = events.filter { if case .saved = $0 { true } else { false } }
    #expect(journaled.count >= 30)
    // The first record, the one after registering, and at least one compaction.
    #expect(wholeSaves.count >= 3)

    let restored = try #require(
      try PersistedRecord.load(from: FileStore(url: world.storeURL), for: NotesReducer(user: "alice"))
    )
    #expect(restored.state.notes.count == 40)
    let second = world.makeMachine()
    await second.start()
    let resumed = await waitFor(second, isLive)
    #expect(resumed?.confirmedState?.notes.count == 40)
    #expect(resumed?.metrics.registers == 0)
    await second.stop()
  }

  @Test("a journal entry this build cannot replay: record and journal set aside, the machine goes on from before it")
  func unreplayableEntrySetAside() async throws {
    let world = World()
    defer { world.cleanUp() }
    let first = await world.startLiveMachine()
    try await world.post("kept")
    await waitFor(first) { $0.confirmedState?.notes == ["kept"] }
    await first.stop()
    let store = FileStore(url: world.storeURL)
    let saved = try Data(contentsOf: world.storeURL)
    let good = try #require(try store.loadJournal(after: saved))
    #expect(good.count == 1)
    let foreign = Data(
      String(decoding: good[0], as: UTF8.self).replacingOccurrences(of: #""type":"note""#, with: #""type":"renamed""#)
        .utf8
    )
    #expect(foreign != good[0])
    try store.appendToJournal(foreign)

    let second = world.makeMachine()
    await second.start()
    let snapshot = await second.snapshot
    guard case .setAside(_, let location?, _)? = snapshot.storeRecovery.first else {
      Issue.record("no recovery reported: \(snapshot.storeRecovery)")
      return
    }
    #expect(FileManager.default.fileExists(atPath: location))
    #expect(FileManager.default.fileExists(atPath: location + ".journal"))
    #expect(snapshot.confirmedState?.notes == ["kept"])
    await second.stop()
    try? FileManager.default.removeItem(atPath: location)
    try? FileManager.default.removeItem(atPath: location + ".journal")
  }
}

@Suite("The snapshot says whether the confirmed state came from the server this session", .hangGuard)
struct ConfirmedThisSessionTests {
  @Test("false on a restart from the file, also while the server cannot be reached; true once it answers")
  func confirmedThisSession() async throws {
    let world = World()
    defer { world.cleanUp() }
    let first = await world.startLiveMachine()
    #expect(await first.snapshot.isConfirmedThisSession)
    await first.stop()
    world.transport.partitioned = true
    let second = world.makeMachine()
    await second.start()
    let restarted = await second.snapshot
    #expect(restarted.confirmedState != nil)
    #expect(!restarted.isConfirmedThisSession)
    await waitFor(second) { $0.metrics.failures >= 1 }
    #expect(await !second.snapshot.isConfirmedThisSession)
    world.transport.partitioned = false
    // The retry after the backoff reaches the server.
    await world.clock.waitForSleepers(count: 1)
    if let retry = world.clock.nextDeadline { world.clock.advance(to: retry) }
    await waitFor(second) { $0.isConfirmedThisSession }
    await second.stop()
  }
}
