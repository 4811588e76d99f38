import EventProtocol
import EventServer

/// Who hears of each change, and how: shared by ``VideoServer`` and ``StoredVideoServer``, so the two send
/// the same events for the same change.
extension VideoServer {
  /// A new video: the sender hears `video_sent`, the recipient `video_incoming` (one `video_sent` with what
  /// the incoming list needs when they are the same user).
  static func uploadDeliveries(
    _ upload: VideoUpload,
    from user: UserID,
    position: Int,
    caption: String?
  ) -> [Delivery<VideoEvent>] {
    if upload.recipient == user {
      let sent = VideoSent(
        video: upload.video,
        recipient: user,
        blobKey: upload.blobKey,
        size: upload.size,
        sender: user,
        position: position,
        caption: caption
      )
      return [Delivery(to: [user], event: .sent(sent))]
    }
    let sent = VideoSent(
      video: upload.video,
      recipient: upload.recipient,
      sender: user,
      position: position,
      caption: caption
    )
    let incoming = IncomingVideoFields(
      video: upload.video,
      sender: user,
      blobKey: upload.blobKey,
      size: upload.size,
      position: position,
      recipient: upload.recipient,
      caption: caption
    )
    return [
      Delivery(to: [user], event: .sent(sent)),
      Delivery(to: [upload.recipient], event: .incoming(incoming)),
    ]
  }

  /// `item`'s caption changed: both users hear it (once when they are the same user).
  static func captionDeliveries(_ item: VideoHistoryItem) -> [Delivery<VideoEvent>] {
    let users = item.sender == item.recipient ? [item.sender] : [item.sender, item.recipient]
    return [Delivery(to: users, event: .captioned(VideoCaptionChanged(video: item.video, caption: item.caption)))]
  }

  /// `video` reached its (new) status: the sender hears the status; the recipient why it stopped waiting,
  /// or, after a download, the status too (every device of theirs learns it).
  static func advanceDeliveries(_ video: TrackedVideo, wasWaiting: Bool) -> [Delivery<VideoEvent>] {
    let change = VideoEvent.status(VideoStatusChanged(video: video.id, status: video.status))
    if video.sender == video.recipient {
      return [Delivery(to: [video.sender], event: change)]
    }
    if wasWaiting {
      let reason: VideoGoneReason = video.status == .viewed ? .viewed : .downloaded
      return [
        Delivery(to: [video.sender], event: change),
        Delivery(to: [video.recipient], event: .incomingGone(VideoGone(video: video.id, reason: reason))),
      ]
    }
    return [Delivery(to: [video.sender, video.recipient], event: change)]
  }

  /// `video` is no longer tracked: the sender hears `video_untracked`; the recipient `video_incoming_gone`
  /// while it waited for them, else `video_untracked` (one event when they are the same user).
  static func forgetDeliveries(_ video: TrackedVideo, reason: VideoGoneReason) -> [Delivery<VideoEvent>] {
    let gone = VideoGone(video: video.id, reason: reason)
    if video.sender == video.recipient {
      return [Delivery(to: [video.sender], event: .untracked(gone))]
    }
    if video.status == .uploaded {
      return [
        Delivery(to: [video.sender], event: .untracked(gone)),
        Delivery(to: [video.recipient], event: .incomingGone(gone)),
      ]
    }
    return [Delivery(to: [video.sender, video.recipient], event: .untracked(gone))]
  }
}
