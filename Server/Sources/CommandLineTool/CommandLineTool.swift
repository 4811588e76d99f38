import ArgumentParser
import Foundation

/// How every tool of this package reads its command line: `swift-argument-parser`'s generated `--help` on
/// standard output (exit 0), and any error in one line on standard error, naming the tool and pointing at
/// `--help`, with exit status 2.
public enum CommandLineTool {
  /// The parsed arguments, or the process ends as described above.
  public static func parse<Arguments: ParsableArguments>(
    _ type: Arguments.Type,
    tool: String,
    arguments: [String] = Array(CommandLine.arguments.dropFirst())
  ) -> Arguments {
    do {
      return try Arguments.parse(arguments)
    } catch {
      // --help (and --version) are not errors: their text goes to standard output.
      if Arguments.exitCode(for: error) == .success {
        print(Arguments.fullMessage(for: error))
        exit(0)
      }
      fail(tool: tool, Arguments.message(for: error))
    }
  }

  /// Ends the process with a one-line error about its command line (exit status 2).
  public static func fail(tool: String, _ message: String) -> Never {
    let line = message.split(separator: "\n").first.map(String.init) ?? message
    FileHandle.standardError.write(Data("\(tool): \(line) (see --help)\n".utf8))
    exit(2)
  }
}
