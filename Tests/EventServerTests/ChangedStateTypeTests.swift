import EventProtocol
import Foundation
import SampleApps
import Testing
import UpdateMachineTesting

@testable import EventServer

/// Version 2 of the note board's state, with a field added after data was saved; `init(from:)` is
/// synthesised, so the new field is required in what it reads.
struct PinnedNoteBoard: NoteBoardVersion2, Codable {
  var notes: [UserID: [String]] = [:]
  var usersWhoseLastQueueWentAway: [UserID] = []
  var pinned: [UserID: String] = [:]
}

/// What both versions 2 do: the note board's commands and snapshots, over their own `notes`.
protocol NoteBoardVersion2: ServerApplication
where Command == NoteBoard.Command, Event == NoteEvent, Snapshot == NoteSnapshot {
  var notes: [UserID: [String]] { get set }
}

extension NoteBoardVersion2 {
  func snapshot(for user: UserID) -> NoteSnapshot { NoteSnapshot(notes: notes[user] ?? []) }

  mutating func handle(
    _ command: NoteBoard.Command,
    from user: UserID
  ) throws(CommandRejection)
    -> [Delivery<NoteEvent>]
  {
    var board = NoteBoard()
    board.notes = notes
    let deliveries = try board.handle(command, from: user)
    notes = board.notes
    return deliveries
  }
}

// UPGRADING-BEGIN
/// Version 2 read tolerantly: a state saved before `pinned` existed starts with no pins.
struct TolerantPinnedNoteBoard: ServerApplication, Codable {
  var notes: [UserID: [String]] = [:]
  var usersWhoseLastQueueWentAway: [UserID] = []
  var pinned: [UserID: String] = [:]  // added in version 2

  init() {}

  init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    notes = try container.decode([UserID: [String]].self, forKey: .notes)
    usersWhoseLastQueueWentAway = try container.decode([UserID].self, forKey: .usersWhoseLastQueueWentAway)
    pinned = try container.decodeIfPresent([UserID: String].self, forKey: .pinned) ?? [:]
  }
}
// UPGRADING-END

extension TolerantPinnedNoteBoard: NoteBoardVersion2 {}

@Suite("A state type changed since the state was saved: one clear refusal naming the field and the remedy")
struct ChangedStateTypeTests {
  /// A log holding a snapshot of version 1 (and a record after it).
  func savedByVersion1() async throws -> InMemoryServerLog {
    let log = InMemoryServerLog()
    let clock = ManualClock(start: t0)
    let (server, _) = try await EventServer.recovering(from: log, application: NoteBoard(), clock: clock, anchor: t0)
    try await server.handle(.post("hello", to: [bob]), from: alice)
    try await server.saveSnapshot()
    try await server.handle(.post("after the snapshot", to: [bob]), from: alice)
    return log
  }

  @Test("a field added without a default: refused, naming application.pinned and docs/upgrading.md; nothing changed")
  func addedFieldWithoutDefault() async throws {
    let log = try await savedByVersion1()
    let before = try log.load()
    do {
      _ = try await EventServer.recovering(from: log, application: PinnedNoteBoard(), clock: ManualClock(start: t0))
      Issue.record("a state of another shape was read")
    } catch {
      #expect(error.detail.contains("application.pinned is missing"), "\(error.detail)")
      #expect(error.detail.contains("docs/upgrading.md"))
      #expect(!error.detail.contains("CodingKeys"), "one line an operator reads: \(error.detail)")
    }
    let after = try log.load()
    #expect(after.snapshot == before.snapshot)
    #expect(after.records == before.records)
  }

  @Test("the same field read with decodeIfPresent: version 2 starts on version 1's state, nothing lost")
  func addedFieldWithDefault() async throws {
    let log = try await savedByVersion1()
    let (server, _) = try await EventServer.recovering(
      from: log,
      application: TolerantPinnedNoteBoard(),
      clock: ManualClock(start: t0)
    )
    #expect(await server.application.notes[bob] == ["hello", "after the snapshot"])
    #expect(await server.application.pinned.isEmpty)
  }

  @Test("docs/upgrading.md shows the tolerant decoder exactly as compiled here")
  func documented() throws {
    try expectDocumented("UPGRADING", from: #filePath, in: "docs/upgrading.md")
  }

  @Test("paths read as an operator would write them")
  func paths() {
    struct Key: CodingKey {
      var stringValue: String
      var intValue: Int?
      init(stringValue: String) { self.stringValue = stringValue }
      init(intValue: Int) {
        self.stringValue = "Index \(intValue)"
        self.intValue = intValue
      }
    }
    #expect(
      SavedStateMismatch.path([Key(stringValue: "application"), Key(intValue: 2), Key(stringValue: "text")])
        == "application[2].text"
    )
    #expect(SavedStateMismatch.path([]) == "the top level")
  }
}

/// Checks that the lines of `file` between `// <name>-BEGIN` and `// <name>-END` appear in `page` as they are.
/// `indent` characters are taken off each line first.
func expectDocumented(_ name: String, from file: String, in page: String, indent: Int = 0) throws {
  let source = try String(contentsOf: URL(fileURLWithPath: file), encoding: .utf8)
  let begin = try #require(source.range(of: "// \(name)-BEGIN\n"))
  let end = try #require(source.range(of: "// \(name)-END", range: begin.upperBound..<source.endIndex))
  let lines = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
  let code = lines.dropLast().map { String($0.dropFirst(indent)) }.joined(separator: "\n")
  let root = URL(fileURLWithPath: file).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
  let text = try String(contentsOf: root.appendingPathComponent(page), encoding: .utf8)
  #expect(text.contains(code), "\(page) lacks the code between // \(name)-BEGIN and -END of \(file)")
}
