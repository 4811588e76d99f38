import EventProtocol
import EventServer

/// A small chat with channels, for partial state: there are too many messages to hold, so clients fetch
/// each channel by page (`Narrow([NarrowTerm("channel", name)])`) and keep the pages live.
///
/// Every change is one event to every user, and ``version`` counts them, with the messages as they stood
/// at each version kept in ``history``: a test reads the server's messages at any client's finger from it.
public struct ChatChannels: ServerApplication, Equatable, Codable {
  /// The messages by id.
  public private(set) var messages: [Int: ChatMessage] = [:]
  /// The users who hear of every change.
  public var members: [UserID]
  /// How many changes there have been.
  public private(set) var version = 0
  /// The messages after each change (index: the version), for tests' oracles.
  public private(set) var history: [[Int: ChatMessage]] = [[:]]
  private var nextID = 1

  /// Creates an empty chat for `members`.
  public init(members: [UserID]) {
    self.members = members
  }

  public func snapshot(for user: UserID) -> ChatClientState {
    ChatClientState(chat: ChatState(version: version))
  }

  public mutating func handle(
    _ command: ChatCommand,
    from user: UserID
  ) throws(CommandRejection) -> [Delivery<ChatEvent>] {
    let event: ChatEvent
    switch command {
    case .post(let channel, let text):
      let message = ChatMessage(id: nextID, channel: channel, sender: user, text: text, reactions: 0)
      nextID += 1
      messages[message.id] = message
      event = .posted(message)
    case .edit(let id, let text):
      guard messages[id] != nil else { throw CommandRejection("no message \(id)") }
      messages[id]!.text = text
      event = .edited(ChatEdit(messageID: id, text: text))
    case .react(let id):
      guard messages[id] != nil else { throw CommandRejection("no message \(id)") }
      messages[id]!.reactions += 1
      event = .reacted(ChatReaction(messageID: id))
    case .move(let id, let channel):
      guard messages[id] != nil else { throw CommandRejection("no message \(id)") }
      messages[id]!.channel = channel
      event = .moved(messages[id]!)
    case .delete(let id):
      guard messages.removeValue(forKey: id) != nil else { throw CommandRejection("no message \(id)") }
      event = .deleted(ChatDeletion(messageID: id))
    }
    version += 1
    history.append(messages)
    return [Delivery(to: members, event: event)]
  }

  public func fetch(_ request: FetchRequest, for user: UserID) throws(CommandRejection) -> FetchPage<ChatMessage> {
    let list = messages.values.filter { $0.belongs(to: request.narrow) }.sorted { $0.id < $1.id }
    return FetchPage.select(list, request: request, position: \.id)
  }

  /// The narrow's list at `version`, for tests.
  public func list(_ narrow: Narrow, at version: Int) -> [ChatMessage] {
    history[version].values.filter { $0.belongs(to: narrow) }.sorted { $0.id < $1.id }
  }
}

/// One chat message.
public struct ChatMessage: Codable, Sendable, Equatable, Hashable {
  public var id: Int
  public var channel: String
  public var sender: UserID
  public var text: String
  public var reactions: Int

  public init(id: Int, channel: String, sender: UserID, text: String, reactions: Int) {
    self.id = id
    self.channel = channel
    self.sender = sender
    self.text = text
    self.reactions = reactions
  }

  /// `id` is the envelope's key on the wire: a message's id travels as `message_id`.
  private enum CodingKeys: String, CodingKey {
    case id = "message_id"
    case channel
    case sender
    case text
    case reactions
  }

  /// Whether the message is in `narrow`: a `channel` term names its channel; the empty narrow holds all.
  public func belongs(to narrow: Narrow) -> Bool {
    narrow.terms.allSatisfy { term in term.operator == "channel" ? term.operand == channel : false }
  }
}

/// What users ask the chat to do.
public enum ChatCommand: Codable, Sendable, Equatable {
  case post(channel: String, text: String)
  case edit(Int, text: String)
  /// Adds one reaction: applied twice, it counts twice (the edit that must not be applied twice).
  case react(Int)
  case move(Int, to: String)
  case delete(Int)
}

/// The whole part of a user's chat state, besides the messages held in part.
public struct ChatState: Codable, Sendable, Equatable {
  /// The server's change count at the finger.
  public var version: Int

  public init(version: Int) {
    self.version = version
  }
}

/// An edit's fields.
public struct ChatEdit: Codable, Sendable, Equatable {
  public var messageID: Int
  public var text: String
}

/// A reaction's fields.
public struct ChatReaction: Codable, Sendable, Equatable {
  public var messageID: Int
}

/// A deletion's fields.
public struct ChatDeletion: Codable, Sendable, Equatable {
  public var messageID: Int
}

/// The chat's events. A change that can move a message between channels (`moved`) carries the whole
/// message, as ``ChatMessage`` narrows require.
public enum ChatEvent: TaggedEventPayload {
  case posted(ChatMessage)
  case edited(ChatEdit)
  case reacted(ChatReaction)
  case moved(ChatMessage)
  case deleted(ChatDeletion)

  public static let cases = [
    EventCase("message_posted", Self.posted), EventCase("message_edited", Self.edited),
    EventCase("message_reacted", Self.reacted), EventCase("message_moved", Self.moved),
    EventCase("message_deleted", Self.deleted),
  ]
}
