import EventProtocol
import UpdateMachine

/// One user's view of the video service: what a registration returns and what the client's reducer keeps.
///
/// - ``outgoing``: the videos the user sent that the server still tracks, with their status, by id (the
///   per-friend view is ``outgoing(to:)``); a new video to a friend never replaces an unviewed one.
/// - ``incoming``: every video sent to the user that is not downloaded yet, oldest first.
/// - ``received``: the videos sent to the user that one of their devices downloaded, with whether one of
///   them viewed it, until the server forgets them (``VideoRetention``): what tells every device of the
///   user that a video was downloaded or viewed on another.
///
/// These three lists are the live part, bounded by the retention windows. A conversation's whole history is
/// held in part, in ``history``: fetched by page (`VideoHistory/conversation(with:)`) and kept live by the
/// same events. A registration's snapshot holds none of it.
public struct VideoSnapshot: Codable, Sendable, Equatable {
  /// The user's sent videos still tracked, in id order.
  public var outgoing: [OutgoingVideo]
  /// The videos waiting for the user to download, oldest first.
  public var incoming: [IncomingVideo]
  /// The videos sent to the user and downloaded by one of their devices, oldest first.
  public var received: [ReceivedVideo]
  /// The conversations' histories the device fetched, kept live; empty in a registration's snapshot.
  public var history: PartialState<VideoHistoryItem>

  /// Creates a snapshot from its parts.
  public init(
    outgoing: [OutgoingVideo] = [],
    incoming: [IncomingVideo] = [],
    received: [ReceivedVideo] = [],
    history: PartialState<VideoHistoryItem> = PartialState()
  ) {
    self.outgoing = outgoing
    self.incoming = incoming
    self.received = received
    self.history = history
  }

  private enum CodingKeys: String, CodingKey {
    case outgoing
    case incoming
    case received
    case history
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(outgoing, forKey: .outgoing)
    try container.encode(incoming, forKey: .incoming)
    try container.encode(received, forKey: .received)
    // A registration's snapshot has no history: the wire form stays what it was.
    if !history.isEmpty { try container.encode(history, forKey: .history) }
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    outgoing = try container.decode([OutgoingVideo].self, forKey: .outgoing)
    incoming = try container.decode([IncomingVideo].self, forKey: .incoming)
    // A state saved before the received list existed: empty until the next registration fills it.
    received = try container.decodeIfPresent([ReceivedVideo].self, forKey: .received) ?? []
    history = try container.decodeIfPresent(PartialState<VideoHistoryItem>.self, forKey: .history) ?? PartialState()
  }

  /// The videos sent to `friend`, oldest first.
  public func outgoing(to friend: UserID) -> [OutgoingVideo] {
    outgoing.filter { $0.recipient == friend }
  }

  /// The incoming videos from `friend`, oldest first.
  public func incoming(from friend: UserID) -> [IncomingVideo] {
    incoming.filter { $0.sender == friend }
  }
}

/// A video the user sent, as they see it.
public struct OutgoingVideo: Codable, Sendable, Hashable {
  /// The video.
  public var id: VideoID
  /// Who it was sent to.
  public var recipient: UserID
  /// How far it got.
  public var status: VideoStatus

  /// Creates an OutgoingVideo from its parts.
  public init(id: VideoID, recipient: UserID, status: VideoStatus) {
    self.id = id
    self.recipient = recipient
    self.status = status
  }
}

/// A video waiting for the user to download it.
public struct IncomingVideo: Codable, Sendable, Hashable {
  /// The video.
  public var id: VideoID
  /// Who sent it.
  public var sender: UserID
  /// Where its file is.
  public var blobKey: BlobKey
  /// Its size in bytes.
  public var size: Int

  /// Creates an IncomingVideo from its parts.
  public init(id: VideoID, sender: UserID, blobKey: BlobKey, size: Int) {
    self.id = id
    self.sender = sender
    self.blobKey = blobKey
    self.size = size
  }
}

/// A video sent to the user that one of their devices downloaded.
public struct ReceivedVideo: Codable, Sendable, Hashable {
  /// The video.
  public var id: VideoID
  /// Who sent it.
  public var sender: UserID
  /// ``VideoStatus/downloaded`` or ``VideoStatus/viewed``.
  public var status: VideoStatus

  /// Creates a ReceivedVideo from its parts.
  public init(id: VideoID, sender: UserID, status: VideoStatus) {
    self.id = id
    self.sender = sender
    self.status = status
  }
}
