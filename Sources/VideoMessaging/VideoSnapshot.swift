import EventProtocol

/// One user's view of the video service: what a registration returns and what the client's reducer keeps.
///
/// - ``outgoing``: the videos the user sent that the server still tracks, with their status, by id (the
///   per-friend view is ``outgoing(to:)``); a new video to a friend never replaces an unviewed one.
/// - ``incoming``: every video sent to the user that is not downloaded yet, oldest first.
public struct VideoSnapshot: Codable, Sendable, Equatable {
  /// The user's sent videos still tracked, in id order.
  public var outgoing: [OutgoingVideo]
  /// The videos waiting for the user to download, oldest first.
  public var incoming: [IncomingVideo]

  /// Creates a snapshot from its parts.
  public init(outgoing: [OutgoingVideo] = [], incoming: [IncomingVideo] = []) {
    self.outgoing = outgoing
    self.incoming = incoming
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
