import EventProtocol
import EventServer
import JSONCoding

/// A small server application for tests and the demo: users post notes to each other.
///
/// Each user's state is the list of notes they received; a `note` event carries one note and a `ping` event
/// carries nothing (a second event type, for testing queues' type filters).
public struct NoteBoard: ServerApplication, Equatable, Codable {
  /// The notes each user has received, oldest first.
  public var notes: [UserID: [String]] = [:]
  /// The users whose last queue was removed, in order (what the server told the application).
  public var usersWhoseLastQueueWentAway: [UserID] = []

  /// An empty board.
  public init() {}

  /// What users ask the board to do.
  public enum Command: Sendable, Equatable, Codable {
    /// Posts `text` to every recipient.
    case post(String, to: [UserID])
    /// Pings every recipient (an event that changes no state).
    case ping(to: [UserID])
    /// Something the board refuses.
    case forbidden
  }

  public func snapshot(for user: UserID) -> NoteSnapshot {
    NoteSnapshot(notes: notes[user] ?? [])
  }

  public mutating func handle(_ command: Command, from user: UserID) throws(CommandRejection) -> [Delivery<NoteEvent>] {
    switch command {
    case .post(let text, let recipients):
      for recipient in Set(recipients) { notes[recipient, default: []].append(text) }
      return [Delivery(to: recipients, event: .note(text: text))]
    case .ping(let recipients):
      return [Delivery(to: recipients, event: .ping)]
    case .forbidden:
      throw CommandRejection("\(user) may not do that")
    }
  }

  public mutating func lastQueueRemoved(for user: UserID) {
    usersWhoseLastQueueWentAway.append(user)
  }
}

/// The notes one user has received.
public struct NoteSnapshot: Codable, Sendable, Equatable {
  /// The notes' texts, oldest first.
  public var notes: [String]

  /// A snapshot holding `notes`.
  public init(notes: [String]) {
    self.notes = notes
  }
}

/// The board's events.
public enum NoteEvent: EventPayload {
  /// A note was posted to the user.
  case note(text: String)
  /// The user was pinged.
  case ping

  public static let knownEventTypes: Set<String> = ["note", "ping"]

  public var eventType: String {
    switch self {
    case .note: "note"
    case .ping: "ping"
    }
  }

  private enum CodingKeys: String, CodingKey {
    case type
    case text
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    switch try container.decode(String.self, forKey: .type) {
    case "note": self = .note(text: try container.decode(String.self, forKey: .text))
    case "ping": self = .ping
    case let other:
      throw DecodingError.dataCorruptedError(
        forKey: .type,
        in: container,
        debugDescription: "not a note event: \(other)"
      )
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    if case .note(let text) = self { try container.encode(text, forKey: .text) }
  }
}

// The same members without `Codable`'s containers, on the package's own coder (the opt-in beside `Codable`;
// `SampleFieldsTests` holds it to the `Codable` path).
extension NoteEvent: JSONFieldsCodable {
  public func encodeFields(to fields: inout JSONFieldsWriter) throws {
    if case .note(let text) = self { try fields.encode(text, forKey: "text") }
  }

  public init(fields: JSONFieldsReader) throws {
    switch try fields.decode(String.self, forKey: "type") {
    case "note": self = .note(text: try fields.decode(String.self, forKey: "text"))
    case "ping": self = .ping
    case let other:
      throw DecodingError.dataCorrupted(
        .init(codingPath: fields.codingPath + [CodingKeys.type], debugDescription: "not a note event: \(other)")
      )
    }
  }
}
