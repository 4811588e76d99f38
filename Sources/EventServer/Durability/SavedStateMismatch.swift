import Foundation

/// Explains why saved state (a snapshot, a log record) does not decode as this build's types: which field,
/// what is wrong with it, and what to do. Starting a server on state saved by an application whose type has
/// since changed is the usual cause.
enum SavedStateMismatch {
  /// What an operator reads when `what` (`"snapshot"`, `"log record 12"`) fails to decode with `error`.
  static func describe(_ error: any Error, reading what: String) -> String {
    guard let error = error as? DecodingError else { return "\(what): \(error)" }
    let problem: String
    switch error {
    case .keyNotFound(let key, let context):
      problem = "\(path(context.codingPath + [key])) is missing"
    case .typeMismatch(let type, let context):
      problem = "\(path(context.codingPath)) is not a \(type)"
    case .valueNotFound(let type, let context):
      problem = "\(path(context.codingPath)) is null where a \(type) is expected"
    case .dataCorrupted(let context):
      problem = "\(path(context.codingPath)): \(context.debugDescription)"
    @unknown default:
      problem = "\(error)"
    }
    return "\(what) does not decode as this build's types: \(problem). If the application's state or command "
      + "type changed since it was saved, give an added field a default when it is absent (decodeIfPresent in "
      + "init(from:)) and decode a renamed or removed field yourself: docs/upgrading.md; nothing was changed"
  }

  /// A coding path as `application.notes[2].text`.
  static func path(_ keys: [any CodingKey]) -> String {
    var text = ""
    for key in keys {
      if let index = key.intValue, key.stringValue.hasPrefix("Index") || key.stringValue == "\(index)" {
        text += "[\(index)]"
      } else {
        text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
      }
    }
    return text.isEmpty ? "the top level" : text
  }
}
