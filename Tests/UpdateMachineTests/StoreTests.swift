import EventProtocol
import Foundation
import SampleApps
import Testing
import UpdateMachineTesting

@testable import UpdateMachine

@Suite("Stores and the persisted record")
struct StoreTests {
  private func temporaryURL() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID()).json")
  }

  @Test("a file store saves atomically, replaces the old bytes and leaves no temporary file")
  func fileStoreSaves() throws {
    let url = temporaryURL()
    defer { try? FileManager.default.removeItem(at: url) }
    let store = FileStore(url: url)
    #expect(try store.load() == nil)
    try store.save(Data("first".utf8))
    try store.save(Data("second".utf8))
    #expect(try store.load() == Data("second".utf8))
    let folder = try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path)
    #expect(!folder.contains { $0.hasPrefix(".\(url.lastPathComponent)") })
  }

  @Test("a failed save is a typed error and keeps what was stored")
  func fileStoreFailure() throws {
    let url = temporaryURL()
    defer { try? FileManager.default.removeItem(at: url) }
    try FileStore(url: url).save(Data("kept".utf8))
    // A folder that cannot be created: its parent is a file.
    let impossible = url.appendingPathComponent("record.json")
    #expect {
      try FileStore(url: impossible).save(Data("lost".utf8))
    } throws: { error in
      (error as? PersistenceError)?.isSameKind(as: .writeFailed("")) == true
    }
    #expect(try FileStore(url: url).load() == Data("kept".utf8))
  }

  @Test("setting aside keeps every unreadable file under a new name")
  func fileStoreSetsAside() throws {
    let url = temporaryURL()
    defer {
      for suffix in ["", ".unreadable", ".unreadable-2"] {
        try? FileManager.default.removeItem(atPath: url.path + suffix)
      }
    }
    let store = FileStore(url: url)
    try store.save(Data("one".utf8))
    #expect(try store.setAside(reason: "test") == url.path + ".unreadable")
    try store.save(Data("two".utf8))
    #expect(try store.setAside(reason: "test") == url.path + ".unreadable-2")
    #expect(try store.load() == nil)
    #expect(try Data(contentsOf: URL(fileURLWithPath: url.path + ".unreadable-2")) == Data("two".utf8))
  }

  @Test("a record round-trips, and undecodable or newer records are typed errors")
  func recordCoding() throws {
    var harness = CoreHarness()
    harness.startLive(notes: ["a"])
    _ = harness.core.submit(.post("b", to: [alice]), now: t0)
    let record = harness.record
    #expect(try PersistedRecord.decode(record.encoded()) == record)

    let cases: [(String, PersistenceError)] = [
      ("{ nope", .corrupt("")),
      (#"{"version": 1, "state": 3}"#, .corrupt("")),
      (#"{"version": 3}"#, .newerVersion(found: 3, supported: 2)),
      (#"{"version": 0}"#, .corrupt("")),
    ]
    for (text, expected) in cases {
      #expect {
        _ = try PersistedRecord<NoteSnapshot, NoteBoard.Command>.decode(Data(text.utf8))
      } throws: { error in
        (error as? PersistenceError)?.isSameKind(as: expected) == true
      }
    }
  }

  @Test("a file store creates its missing folder on the first save")
  func fileStoreCreatesFolder() throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("new-\(UUID())/Application Support")
    defer { try? FileManager.default.removeItem(at: folder.deletingLastPathComponent()) }
    let store = FileStore(
      url: folder.appendingPathComponent("sync.json"),
      protection: .completeUntilFirstUserAuthentication
    )
    try store.save(Data("first".utf8))
    #expect(try store.load() == Data("first".utf8))
  }

  @Test("temporary files left by a crash in the middle of a save are removed at load")
  func leftoverTemporaryFilesRemoved() throws {
    let url = temporaryURL()
    defer { try? FileManager.default.removeItem(at: url) }
    let folder = url.deletingLastPathComponent()
    let leftover = folder.appendingPathComponent(".\(url.lastPathComponent).crashed.tmp")
    let unrelated = folder.appendingPathComponent(".unrelated-\(UUID()).tmp")
    defer { try? FileManager.default.removeItem(at: unrelated) }
    try Data("half a rec".utf8).write(to: leftover)
    try Data("someone else's".utf8).write(to: unrelated)
    try FileStore(url: url).save(Data("whole".utf8))
    #expect(try FileStore(url: url).load() == Data("whole".utf8))
    #expect(!FileManager.default.fileExists(atPath: leftover.path))
    #expect(FileManager.default.fileExists(atPath: unrelated.path))
  }
}
