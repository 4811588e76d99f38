import Foundation
import Synchronization
import TestScheduling
import Testing

@testable import Demo

@Suite("Demo --scripted")
struct ScriptedSessionsTests {
  /// The lines a session writes, kept for the test to read.
  final class Lines: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    func append(_ line: String) { lines.withLock { $0.append(line) } }
  }

  @Test("every scripted session runs to its last step", .hangGuard, arguments: [2026, 7] as [UInt64])
  func everySessionRunsToItsEnd(seed: UInt64) async throws {
    let lines = Lines()
    try await Demo.runScriptedSessions(seed: seed) { lines.append($0) }
    let text = lines.all.joined(separator: "\n")
    // The last step of each session, in the order they run.
    let lastSteps = [
      "the client matches code BAD_EVENT_QUEUE_ID and registers again",
      "resumed with the stored finger: no new registration",
      "bob's engine: registers",
    ]
    var searchFrom = text.startIndex
    for step in lastSteps {
      let found = text.range(of: step, range: searchFrom..<text.endIndex)
      #expect(found != nil, "seed \(seed): no line '\(step)' after the earlier sessions' ends:\n\(text)")
      if let found { searchFrom = found.upperBound }
    }
    #expect(text.contains("resumed and complete: 300 kB handed to bob's app"))
  }
}
