import Foundation
import TestScheduling
import Testing

/// A time limit shorter than a busy run is a verdict on the machine's load (`hangGuard`'s documentation says
/// why); this keeps the root's tests on the one limit that only a hang meets.
@Test("every time limit in the root's tests is the hang guard, which outlasts a busy run")
func timeLimitsAreHangGuards() throws {
  let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
  let files = try #require(FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil))
  let limit = ".time" + "Limit("  // split, so that this line is not a match
  var shorterLimits: [String] = []
  for case let file as URL in files where file.pathExtension == "swift" {
    let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
    for (index, line) in lines.enumerated() where line.contains(limit) {
      shorterLimits.append("\(file.lastPathComponent):\(index + 1): \(line.trimmingCharacters(in: .whitespaces))")
    }
  }
  #expect(shorterLimits.isEmpty, "use .hangGuard:\n\(shorterLimits.joined(separator: "\n"))")
  #expect(TimeLimitTrait.hangGuard.timeLimit >= .seconds(600))
}
