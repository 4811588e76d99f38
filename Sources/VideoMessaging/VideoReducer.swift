import EventProtocol
import UpdateMachine

/// The client side of the video service: keeps a device's copy of its user's ``VideoSnapshot``.
///
/// - A status for a video the client does not track (an older, replaced or deleted one) is ignored: a
///   status for vid1 never touches vid2 (seed 000).
/// - A status never goes back.
/// - An incoming video already listed is ignored; incoming videos stay in id order.
/// - Pending writes show at once: a recording as ``VideoStatus/sending`` until the server confirms it, a
///   video downloaded or viewed leaves the incoming list, a deleted one leaves the outgoing list.
///
/// What to download, and never twice, is the device's ``TransferQueue``'s job: the reducer only mirrors
/// the server.
public struct VideoReducer: UpdateReducer {
  /// Creates the reducer.
  public init() {}

  public var initialState: VideoSnapshot { VideoSnapshot() }

  public func apply(_ event: VideoEvent, to state: inout VideoSnapshot) throws(ReducerError) {
    switch event {
    case .sent(let sent):
      insertOutgoing(OutgoingVideo(id: sent.video, recipient: sent.recipient, status: .uploaded), into: &state)
    case .status(let change):
      if let index = state.outgoing.firstIndex(where: { $0.id == change.video }) {
        state.outgoing[index].status = max(state.outgoing[index].status, change.status)
      }
    case .untracked(let ref):
      state.outgoing.removeAll { $0.id == ref.video }
    case .incoming(let fields):
      guard !state.incoming.contains(where: { $0.id == fields.video }) else { return }
      let video = IncomingVideo(id: fields.video, sender: fields.sender, blobKey: fields.blobKey, size: fields.size)
      let index = state.incoming.firstIndex { $0.id > video.id } ?? state.incoming.endIndex
      state.incoming.insert(video, at: index)
    case .incomingGone(let ref):
      state.incoming.removeAll { $0.id == ref.video }
    }
  }

  public func applyOptimistically(_ command: VideoCommand, to state: inout VideoSnapshot) {
    switch command {
    case .uploaded(let upload):
      insertOutgoing(OutgoingVideo(id: upload.video, recipient: upload.recipient, status: .sending), into: &state)
    case .downloaded(let video), .viewed(let video):
      state.incoming.removeAll { $0.id == video }
    case .deleted(let video):
      state.outgoing.removeAll { $0.id == video }
    case .uploadStarted, .uploadCompleted, .uploadAbandoned:
      break
    }
  }

  private func insertOutgoing(_ video: OutgoingVideo, into state: inout VideoSnapshot) {
    guard !state.outgoing.contains(where: { $0.id == video.id }) else { return }
    let index = state.outgoing.firstIndex { $0.id > video.id } ?? state.outgoing.endIndex
    state.outgoing.insert(video, at: index)
  }
}
