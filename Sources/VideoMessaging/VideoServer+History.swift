import EventProtocol
import EventServer

/// The history of each conversation: every video sent between two users, kept after the live lists let it
/// go (retired), until its sender deletes it, it expires unwatched, or the conversation holds more than
/// ``VideoRetention/historyPerConversation`` videos (the oldest go, announced as `video_history_trimmed`).
/// Clients fetch it by page (``VideoHistory/conversation(with:)``) and keep what they fetched live.
extension VideoServer {
  /// Two users, in a fixed order: the key of their conversation.
  struct Conversation: Codable, Sendable, Hashable {
    var first: UserID
    var second: UserID

    init(_ one: UserID, _ other: UserID) {
      (first, second) = one <= other ? (one, other) : (other, one)
    }
  }

  /// Records a new video in its conversation's history; returns its position.
  mutating func recordHistory(of upload: VideoUpload, from sender: UserID, caption: String?) -> Int {
    let position = nextHistoryPosition
    nextHistoryPosition += 1
    history[upload.video] = VideoHistoryItem(
      video: upload.video,
      sender: sender,
      recipient: upload.recipient,
      status: .uploaded,
      position: position,
      caption: caption
    )
    conversations[Conversation(sender, upload.recipient), default: []].append(upload.video)
    return position
  }

  /// The sender sets, changes or removes the caption of a video of the history; both users hear of it. A
  /// caption for a video no history holds (deleted, expired, trimmed, never sent) is logged and dropped,
  /// as a status for an untracked video is; one that changes nothing emits nothing.
  mutating func recaption(
    _ id: VideoID,
    to caption: String,
    by user: UserID
  ) throws(CommandRejection)
    -> [Delivery<VideoEvent>]
  {
    let text = try Self.captionText(caption, limits: limits)
    guard var item = history[id] else {
      drop("caption for video \(id), in no history")
      return []
    }
    guard item.sender == user else { throw CommandRejection("only the sender of \(id) may caption it") }
    guard item.caption != text else { return [] }
    item.caption = text
    history[id] = item
    return Self.captionDeliveries(item)
  }

  /// A caption as the history keeps it: `nil` for none or empty.
  /// - Throws: ``CommandRejection`` over ``VideoServerLimits/maximumCaptionBytes``.
  static func captionText(_ caption: String?, limits: VideoServerLimits) throws(CommandRejection) -> String? {
    guard let caption, !caption.isEmpty else { return nil }
    guard caption.utf8.count <= limits.maximumCaptionBytes else {
      throw CommandRejection("a caption is at most \(limits.maximumCaptionBytes) bytes")
    }
    return caption
  }

  /// Drops a video from the history (deleted or expired: nothing to look back at).
  mutating func forgetHistory(of video: VideoID) {
    guard let item = history.removeValue(forKey: video) else { return }
    let conversation = Conversation(item.sender, item.recipient)
    conversations[conversation]?.removeAll { $0 == video }
    if conversations[conversation]?.isEmpty == true { conversations[conversation] = nil }
  }

  /// Lets the oldest videos of `conversation` go while it holds more than the retention allows; both users
  /// hear of each. A video still live (tracked) is never trimmed.
  mutating func trimHistory(of conversation: Conversation) -> [Delivery<VideoEvent>] {
    var deliveries: [Delivery<VideoEvent>] = []
    while let ids = conversations[conversation], ids.count > retention.historyPerConversation,
      let oldest = ids.first(where: { videos[$0] == nil })
    {
      forgetHistory(of: oldest)
      let users =
        conversation.first == conversation.second ? [conversation.first] : [conversation.first, conversation.second]
      deliveries.append(Delivery(to: users, event: .historyTrimmed(VideoGone(video: oldest, reason: nil))))
    }
    return deliveries
  }

  /// A page of a conversation's history: the narrow `dm:a,b` (one term, naming the caller), or the empty
  /// narrow for every video of the caller's conversations. Another user's conversation is refused.
  public func fetch(_ request: FetchRequest, for user: UserID) throws(CommandRejection) -> FetchPage<VideoHistoryItem> {
    let list: [VideoHistoryItem]
    if let conversation = try Self.conversation(of: request.narrow, for: user) {
      list = (conversations[conversation] ?? []).compactMap { history[$0] }
    } else {
      list = conversations.filter { $0.key.first == user || $0.key.second == user }.values
        .flatMap { $0.compactMap { history[$0] } }
        .sorted { $0.position < $1.position }
    }
    return FetchPage.select(list, request: request, position: \.position)
  }

  /// The conversation a narrow names (`dm:a,b`, one term naming `user`), or `nil` for the empty narrow
  /// (every conversation of `user`).
  /// - Throws: ``CommandRejection`` for any other narrow, or another user's conversation.
  static func conversation(of narrow: Narrow, for user: UserID) throws(CommandRejection) -> Conversation? {
    switch narrow.terms.count {
    case 0:
      return nil
    case 1:
      guard let operand = narrow.operand("dm") else {
        throw CommandRejection("the video service's narrows are dm:<user>,<user>")
      }
      let participants = VideoHistory.participants(operand)
      guard participants.contains(user), (1...2).contains(participants.count) else {
        throw CommandRejection("a conversation's narrow names the caller and at most one other user")
      }
      return Conversation(user, participants.subtracting([user]).first ?? user)
    default:
      throw CommandRejection("the video service's narrows have one term, dm:<user>,<user>")
    }
  }
}
