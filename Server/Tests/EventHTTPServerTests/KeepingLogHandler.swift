import Logging
import Synchronization

/// A log handler that keeps each line with its level and metadata (the logger's own and the line's), for
/// tests that check what is logged.
struct KeepingLogHandler: LogHandler {
  /// One line as logged.
  struct Line: Sendable {
    var level: Logger.Level
    var message: String
    var metadata: [String: String]
  }

  /// The lines, shared by every copy of the handler (a logger copies its handler).
  final class Lines: Sendable {
    let lines = Mutex<[Line]>([])
  }

  let kept = Lines()
  var metadata: Logger.Metadata = [:]
  var metadataProvider: Logger.MetadataProvider?
  var logLevel: Logger.Level = .info

  subscript(metadataKey key: String) -> Logger.Metadata.Value? {
    get { metadata[key] }
    set { metadata[key] = newValue }
  }

  func log(event: LogEvent) {
    let all = metadata.merging(event.metadata ?? [:]) { _, line in line }.mapValues(\.description)
    kept.lines.withLock { $0.append(Line(level: event.level, message: event.message.description, metadata: all)) }
  }
}
