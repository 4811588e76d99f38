import EventProtocol
import UpdateMachine

/// The client side of the video service: keeps a device's copy of its user's ``VideoSnapshot``.
///
/// - A status for a video the client does not track (an older, replaced or deleted one) is ignored: a
///   status for vid1 never touches vid2 (seed 000).
/// - A status never goes back.
/// - An incoming video already listed is ignored; every list stays in id order.
/// - A video that leaves the incoming list because it was downloaded or viewed (on any of the user's
///   devices) moves to the received list with that status; `video_status` raises it there too, so every
///   device of the recipient learns "viewed".
/// - A video sent to yourself is in the outgoing list and in the incoming (then received) list, and each of
///   its changes arrives once: `video_sent`, `video_status` and `video_untracked` settle both sides.
/// - Pending writes show at once: a recording as ``VideoStatus/sending`` until the server confirms it, a
///   video downloaded or viewed moves from the incoming list to the received one, a deleted one leaves the
///   outgoing list.
///
/// What to download, and never twice, is the device's ``TransferQueue``'s job: the reducer only mirrors
/// the server.
///
/// The conversations' histories (``VideoSnapshot/history``) follow the same events: a new video (with its
/// position) is added where a fetched page is complete, a status raises a known video's, a caption
/// replaces a known video's, a deleted or expired video leaves, a retired one stays (it left the live lists
/// only), a trimmed one leaves. A caption the user set shows at once on a video the device knows, until the
/// server confirms it (or refuses it: then the confirmed caption shows again).
public struct VideoReducer: PartialUpdateReducer {
  /// Creates the reducer.
  public init() {}

  public var initialState: VideoSnapshot { VideoSnapshot() }

  public func apply(_ event: VideoEvent, to state: inout VideoSnapshot) throws(ReducerError) {
    switch event {
    case .sent(let sent):
      Self.insert(OutgoingVideo(id: sent.video, recipient: sent.recipient, status: .uploaded), into: &state.outgoing)
      if let blobKey = sent.blobKey, let size = sent.size {
        Self.insert(
          IncomingVideo(id: sent.video, sender: sent.recipient, blobKey: blobKey, size: size),
          into: &state.incoming
        )
      }
    case .status(let change):
      if let index = state.outgoing.firstIndex(where: { $0.id == change.video }) {
        state.outgoing[index].status = max(state.outgoing[index].status, change.status)
      }
      if change.status >= .downloaded { Self.receive(change.video, status: change.status, in: &state) }
    case .untracked(let gone):
      state.outgoing.removeAll { $0.id == gone.video }
      state.incoming.removeAll { $0.id == gone.video }
      state.received.removeAll { $0.id == gone.video }
    case .incoming(let fields):
      Self.insert(
        IncomingVideo(id: fields.video, sender: fields.sender, blobKey: fields.blobKey, size: fields.size),
        into: &state.incoming
      )
    case .incomingGone(let gone):
      switch gone.reason {
      case .downloaded?: Self.receive(gone.video, status: .downloaded, in: &state)
      case .viewed?: Self.receive(gone.video, status: .viewed, in: &state)
      case .deleted?, .expired?, .retired?, nil: state.incoming.removeAll { $0.id == gone.video }
      }
    case .historyTrimmed, .captioned:
      break
    }
  }

  public var partialState: WritableKeyPath<VideoSnapshot, PartialState<VideoHistoryItem>> { \.history }

  public func applyPartial(_ event: VideoEvent, to history: inout PartialState<VideoHistoryItem>) throws(ReducerError) {
    switch event {
    case .sent(let sent):
      guard let sender = sent.sender, let position = sent.position else { return }
      history.upsert(
        VideoHistoryItem(
          video: sent.video,
          sender: sender,
          recipient: sent.recipient,
          status: .uploaded,
          position: position,
          caption: sent.caption
        )
      )
    case .incoming(let fields):
      guard let position = fields.position, let recipient = fields.recipient else { return }
      history.upsert(
        VideoHistoryItem(
          video: fields.video,
          sender: fields.sender,
          recipient: recipient,
          status: .uploaded,
          position: position,
          caption: fields.caption
        )
      )
    case .status(let change):
      history.update(change.video) { $0.status = max($0.status, change.status) }
    case .untracked(let gone), .incomingGone(let gone):
      switch gone.reason {
      case .downloaded?: history.update(gone.video) { $0.status = max($0.status, .downloaded) }
      case .viewed?: history.update(gone.video) { $0.status = max($0.status, .viewed) }
      case .retired?: break
      case .deleted?, .expired?, nil: history.remove(gone.video)
      }
    case .historyTrimmed(let gone):
      history.remove(gone.video)
    case .captioned(let change):
      history.update(change.video) { $0.caption = change.caption }
    }
  }

  public func applyOptimistically(_ command: VideoCommand, to state: inout VideoSnapshot) {
    switch command {
    case .uploaded(let upload):
      Self.insert(OutgoingVideo(id: upload.video, recipient: upload.recipient, status: .sending), into: &state.outgoing)
    case .downloaded(let video):
      Self.receive(video, status: .downloaded, in: &state)
    case .viewed(let video):
      Self.receive(video, status: .viewed, in: &state)
    case .deleted(let video):
      state.outgoing.removeAll { $0.id == video }
    case .captioned(let video, let caption):
      state.history.update(video) { $0.caption = caption.isEmpty ? nil : caption }
    case .uploadStarted, .uploadCompleted, .uploadAbandoned:
      break
    }
  }

  /// Moves an incoming video to the received list with `status`, or raises its status there.
  private static func receive(_ video: VideoID, status: VideoStatus, in state: inout VideoSnapshot) {
    if let index = state.incoming.firstIndex(where: { $0.id == video }) {
      let incoming = state.incoming.remove(at: index)
      insert(ReceivedVideo(id: video, sender: incoming.sender, status: status), into: &state.received)
    } else if let index = state.received.firstIndex(where: { $0.id == video }) {
      state.received[index].status = max(state.received[index].status, status)
    }
  }

  private static func insert<Video: Identifiable>(_ video: Video, into list: inout [Video])
  where Video.ID == VideoID {
    guard !list.contains(where: { $0.id == video.id }) else { return }
    let index = list.firstIndex { $0.id > video.id } ?? list.endIndex
    list.insert(video, at: index)
  }
}

extension OutgoingVideo: Identifiable {}
extension IncomingVideo: Identifiable {}
extension ReceivedVideo: Identifiable {}
