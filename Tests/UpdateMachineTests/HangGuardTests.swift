import Foundation
import TestScheduling
import Testing

/// A time limit shorter than a busy run is a verdict on the machine's load (`hangGuard`'s documentation says
/// why); this keeps the tests of both packages on the one limit that only a hang meets.
@Test("every time limit in the tests, the root's and Server/'s, is the hang guard, which outlasts a busy run")
func timeLimitsAreHangGuards() throws {
  let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
  let serverTests = tests.deletingLastPathComponent().appendingPathComponent("Server/Tests")
  let limit = ".time" + "Limit("  // split, so that this line is not a match
  var shorterLimits: [String] = []
  var filesRead = (root: 0, server: 0)
  for folder in [tests, serverTests] {
    let files = try #require(FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil))
    for case let file as URL in files where file.pathExtension == "swift" {
      if folder == tests { filesRead.root += 1 } else { filesRead.server += 1 }
      let text = try String(contentsOf: file, encoding: .utf8)
      for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
      where line.contains(limit) {
        shorterLimits.append("\(file.lastPathComponent):\(index + 1): \(line.trimmingCharacters(in: .whitespaces))")
      }
    }
  }
  #expect(filesRead.root > 100 && filesRead.server > 40, "read \(filesRead) test files")
  #expect(shorterLimits.isEmpty, "use .hangGuard:\n\(shorterLimits.joined(separator: "\n"))")
  #expect(TimeLimitTrait.hangGuard.timeLimit >= .seconds(600))
}
