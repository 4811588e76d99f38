import Foundation
import Logging

/// A `swift-log` handler writing one JSON object per line to standard error, for log collectors:
/// `{"time":"2026-11-23T20:48:01.123Z","level":"info","label":"event-server","message":"…","metadata":{…}}`.
///
/// ```swift
/// LoggingSystem.bootstrap { label in JSONLogHandler(label: label) }
/// ```
public struct JSONLogHandler: LogHandler {
  /// The logger's label.
  public let label: String
  public var logLevel: Logger.Level = .info
  public var metadata: Logger.Metadata = [:]

  /// A handler for the logger `label`.
  public init(label: String) {
    self.label = label
  }

  public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
    get { metadata[key] }
    set { metadata[key] = newValue }
  }

  public func log(event: LogEvent) {
    var merged = metadata
    if let extra = event.metadata { merged.merge(extra) { _, new in new } }
    let entry = Entry(
      time: Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true)),
      level: event.level.rawValue,
      label: label,
      message: event.message.description,
      metadata: merged.isEmpty ? nil : merged.mapValues { $0.description }
    )
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    guard var line = try? encoder.encode(entry) else { return }
    line.append(UInt8(ascii: "\n"))
    FileHandle.standardError.write(line)
  }

  private struct Entry: Encodable {
    var time: String
    var level: String
    var label: String
    var message: String
    var metadata: [String: String]?
  }
}
