import Foundation
import Testing

/// Keeps the examples of docs/simulation.md honest: the code between two markers of a test file must
/// appear in the page as it is.
enum DocumentedCode {
  /// The lines of `file` between the line `// <name>-BEGIN` and the line holding `// <name>-END`, with
  /// `indent` characters taken off each line.
  static func code(named name: String, in file: String, indent: Int) throws -> String {
    let source = try String(contentsOf: URL(fileURLWithPath: file), encoding: .utf8)
    let begin = try #require(source.range(of: "// \(name)-BEGIN\n"))
    let end = try #require(source.range(of: "// \(name)-END", range: begin.upperBound..<source.endIndex))
    let lines = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
    return lines.dropLast().map { String($0.dropFirst(indent)) }.joined(separator: "\n")
  }

  /// docs/simulation.md.
  static func simulationPage(from file: String) throws -> String {
    let root = URL(fileURLWithPath: file).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    return try String(contentsOf: root.appendingPathComponent("docs/simulation.md"), encoding: .utf8)
  }
}
