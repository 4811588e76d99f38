import EventProtocol
import UpdateMachine

/// A chat message is an item held in part: keyed and ordered by its id, in its channel's narrow.
extension ChatMessage: PartialItem {
  public var key: Int { id }
  public var position: Int { id }
}

/// A chat client's state, and the registration's snapshot: the whole part, and the messages held in part
/// (none in a registration's snapshot: they are fetched by channel).
public struct ChatClientState: Codable, Sendable, Equatable {
  /// The whole part (from the registration's snapshot, kept by events).
  public var chat: ChatState
  /// The messages the client holds, by channel narrow.
  public var messages: PartialState<ChatMessage>
  /// Texts posted from this device and not confirmed yet (the outbox's placeholders).
  public var pendingPosts: [String] = []

  /// A client's state with this whole part and these messages held.
  public init(chat: ChatState, messages: PartialState<ChatMessage> = PartialState()) {
    self.chat = chat
    self.messages = messages
  }
}

/// The chat's client reducer: the whole part counts changes; the messages follow events with
/// `PartialState/upsert(_:)`, `PartialState/update(_:_:)` and `PartialState/remove(_:)`.
public struct ChatReducer: PartialUpdateReducer {
  /// The chat's reducer.
  public init() {}

  public var initialState: ChatClientState { ChatClientState(chat: ChatState(version: 0)) }

  public var partialState: WritableKeyPath<ChatClientState, PartialState<ChatMessage>> { \.messages }

  public func apply(_ event: ChatEvent, to state: inout ChatClientState) throws(ReducerError) {
    state.chat.version += 1
  }

  public func applyPartial(_ event: ChatEvent, to messages: inout PartialState<ChatMessage>) throws(ReducerError) {
    switch event {
    case .posted(let message), .moved(let message): messages.upsert(message)
    case .edited(let edit): messages.update(edit.messageID) { $0.text = edit.text }
    case .reacted(let reaction): messages.update(reaction.messageID) { $0.reactions += 1 }
    case .deleted(let deletion): messages.remove(deletion.messageID)
    }
  }

  public func applyOptimistically(_ mutation: ChatCommand, to state: inout ChatClientState) {
    if case .post(_, let text) = mutation { state.pendingPosts.append(text) }
  }
}
