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
  /// The server's number for it, in the order messages were posted: its position.
  public var id: Int
  /// The channel it is in.
  public var channel: String
  /// Who posted it.
  public var sender: UserID
  /// What it says.
  public var text: String
  /// How many reactions it has had.
  public var reactions: Int

  /// A message with these fields.
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
  /// Posts a new message to a channel.
  case post(channel: String, text: String)
  /// Replaces a message's text.
  case edit(Int, text: String)
  /// Adds one reaction: applied twice, it counts twice (the edit that must not be applied twice).
  case react(Int)
  /// Moves a message to another channel.
  case move(Int, to: String)
  /// Deletes a message.
  case delete(Int)
}

/// The whole part of a user's chat state, besides the messages held in part.
public struct ChatState: Codable, Sendable, Equatable {
  /// The server's change count at the finger.
  public var version: Int

  /// The state at change count `version`.
  public init(version: Int) {
    self.version = version
  }
}

/// An edit's fields.
public struct ChatEdit: Codable, Sendable, Equatable {
  /// The message edited.
  public var messageID: Int
  /// Its new text.
  public var text: String
}

/// A reaction's fields.
public struct ChatReaction: Codable, Sendable, Equatable {
  /// The message reacted to.
  public var messageID: Int
}

/// A deletion's fields.
public struct ChatDeletion: Codable, Sendable, Equatable {
  /// The message deleted.
  public var messageID: Int
}

/// The chat's events. A change that can move a message between channels (`moved`) carries the whole
/// message, as ``ChatMessage`` narrows require.
public enum ChatEvent: TaggedEventPayload {
  /// A message was posted: the whole message.
  case posted(ChatMessage)
  /// A message's text changed.
  case edited(ChatEdit)
  /// A message got a reaction.
  case reacted(ChatReaction)
  /// A message moved to another channel: the whole message, so a client holding only the new channel gets it.
  case moved(ChatMessage)
  /// A message was deleted.
  case deleted(ChatDeletion)

  public static let cases = [
    EventCase("message_posted", Self.posted), EventCase("message_edited", Self.edited),
    EventCase("message_reacted", Self.reacted), EventCase("message_moved", Self.moved),
    EventCase("message_deleted", Self.deleted),
  ]
}
