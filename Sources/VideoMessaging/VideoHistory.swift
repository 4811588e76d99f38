import EventProtocol
import UpdateMachine

/// One video in a conversation's history, as both its sender and its recipient see it: what the client
/// holds in part (a conversation is a narrow fetched by page, `VideoHistory/conversation(with:)`) and the
/// server keeps after the live lists have let the video go.
public struct VideoHistoryItem: Codable, Sendable, Hashable {
  /// The video.
  public var video: VideoID
  /// Who sent it.
  public var sender: UserID
  /// Who it was sent to.
  public var recipient: UserID
  /// How far it got.
  public var status: VideoStatus
  /// Its place in the history: the server numbers videos in the order their `uploaded` reached it (the
  /// list's order). Ids are minted by senders (time plus randomness, ``VideoID/make(at:using:)``) and say
  /// nothing about the order: a video recorded offline and sent later comes after those sent meanwhile.
  public var position: Int
  /// Its caption, which its sender may change at any time (`nil`: none).
  public var caption: String?

  /// Creates a VideoHistoryItem from its parts.
  public init(
    video: VideoID,
    sender: UserID,
    recipient: UserID,
    status: VideoStatus,
    position: Int,
    caption: String? = nil
  ) {
    self.video = video
    self.sender = sender
    self.recipient = recipient
    self.status = status
    self.position = position
    self.caption = caption
  }
}

extension VideoHistoryItem: PartialItem {
  public var key: VideoID { video }

  /// In `dm:a,b` when it went between `a` and `b` (either way; `dm:a` for videos `a` sent to themselves);
  /// in the empty narrow always.
  public func belongs(to narrow: Narrow) -> Bool {
    narrow.terms.allSatisfy { term in
      term.operator == "dm" && VideoHistory.participants(term.operand) == Set([sender, recipient])
    }
  }
}

/// The narrows of the video service.
public enum VideoHistory {
  /// The conversation between `user` and `friend`: every video either sent to the other, oldest first
  /// (`dm:alice,bob`, the two names sorted; `dm:alice` for what alice sent herself). A user may fetch only
  /// conversations they are in.
  public static func conversation(between user: UserID, and friend: UserID) -> Narrow {
    Narrow([NarrowTerm("dm", Set([user, friend]).map(\.rawValue).sorted().joined(separator: ","))])
  }

  /// The newest `count` videos of the conversation between `user` and `friend`.
  public static func latest(_ count: Int, between user: UserID, and friend: UserID) -> FetchRequest {
    FetchRequest(narrow: conversation(between: user, and: friend), anchor: .newest, before: count, after: 0)
  }

  /// The users a `dm` operand names.
  static func participants(_ operand: String) -> Set<UserID> {
    Set(operand.split(separator: ",", omittingEmptySubsequences: false).map { UserID(rawValue: String($0)) })
  }
}
