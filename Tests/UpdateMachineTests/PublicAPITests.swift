import EventProtocol
import Foundation
import Testing
import UpdateMachine

/// What an app (not `@testable`) can do with the public API: build preview values, and get a compiler error
/// at the reducer when it forgets to say whether it writes.
@Suite("Public API an app relies on")
struct PublicAPITests {
  @Test("snapshots, entries, request ids and reports can be built for previews")
  func previewValues() {
    let asOf = Timestamp(Date(timeIntervalSince1970: 1_700_000_000))
    let entry = OutboxEntry(id: MutationID(1), mutation: "draft", submittedAt: asOf)
    let snapshot = UpdateMachineSnapshot<[String], String>(
      state: ["a", "draft"],
      confirmedState: ["a"],
      phase: .polling(EventFinger(queueID: "q", lastEventID: 3)),
      freshness: FreshnessReport(freshness: .live, dataAsOf: asOf),
      pendingMutations: [entry],
      rejectedMutations: [RejectedMutation(id: MutationID(0), mutation: "x", reason: "no")]
    )
    #expect(snapshot.pendingMutations == [entry])
    #expect(snapshot.stopReason == nil)
    #expect(RequestID(rawValue: 4) > RequestID(rawValue: 3))
    #expect(snapshot.freshness.dataAsOf?.date == Date(timeIntervalSince1970: 1_700_000_000))
  }

  @Test("a reducer that forgets applyOptimistically does not compile, and the error points at the reducer")
  func forgottenMutationTypeIsACompileErrorAtTheReducer() throws {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    let modules = root.appendingPathComponent(".build/debug/Modules")
    try #require(FileManager.default.fileExists(atPath: modules.path), "no built modules at \(modules.path)")
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reducer-\(UUID())")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let snippet = """
      import EventProtocol
      import UpdateMachine

      struct Ping: EventPayload {
        static let knownEventTypes: Set<String> = ["ping"]
        var eventType: String { "ping" }
      }

      struct ForgetfulReducer: UpdateReducer {
        var initialState: [String] { [] }
        func apply(_ event: Ping, to state: inout [String]) throws(ReducerError) {}
      }

      struct ReadOnlyReducer: ReadOnlyUpdateReducer {
        var initialState: [String] { [] }
        func apply(_ event: Ping, to state: inout [String]) throws(ReducerError) {}
      }
      """
    let file = folder.appendingPathComponent("Reducers.swift")
    try snippet.write(to: file, atomically: true, encoding: .utf8)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["swiftc", "-typecheck", "-swift-version", "6", "-I", modules.path, file.path]
    let errors = Pipe()
    process.standardError = errors
    process.standardOutput = Pipe()
    try process.run()
    let output = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus != 0)
    #expect(
      output.contains("Reducers.swift:9:8: error: type 'ForgetfulReducer' does not conform to protocol 'UpdateReducer'")
    )
    #expect(!output.contains("ReadOnlyReducer' does not conform"))
  }
}
