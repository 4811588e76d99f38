import EventProtocol

/// The server's durable form: the videos, the bindings, the bounds and retention; what is derived from them
/// (footprints, retention deadlines) is rebuilt when decoded.
extension VideoServer {
  private enum CodingKeys: String, CodingKey {
    case videos
    case pendingBlobDeletions
    case droppedCommands
    case blobBindings
    case uploadOwners
    case limits
    case retention
    case clock
    case history
    case nextHistoryPosition
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    self.init(
      limits: try container.decodeIfPresent(VideoServerLimits.self, forKey: .limits) ?? VideoServerLimits(),
      retention: try container.decodeIfPresent(VideoRetention.self, forKey: .retention) ?? VideoRetention()
    )
    videos = try container.decode([VideoID: TrackedVideo].self, forKey: .videos)
    pendingBlobDeletions = try container.decode([BlobKey].self, forKey: .pendingBlobDeletions)
    droppedCommands = try container.decode([String].self, forKey: .droppedCommands)
    clock = try container.decodeIfPresent(Timestamp.self, forKey: .clock) ?? Timestamp(sinceEpoch: .zero)
    // State written before the history narrows: no history yet.
    history = try container.decodeIfPresent([VideoID: VideoHistoryItem].self, forKey: .history) ?? [:]
    nextHistoryPosition =
      try container.decodeIfPresent(Int.self, forKey: .nextHistoryPosition)
      ?? (history.values.map(\.position).max() ?? 0) + 1
    if let bindings = try container.decodeIfPresent([BlobKey: BlobBinding].self, forKey: .blobBindings) {
      blobBindings = bindings
    } else {
      // State written before keys were bound to videos: uploaders only, and each tracked video's claim.
      let owners = try container.decodeIfPresent([BlobKey: UserID].self, forKey: .uploadOwners) ?? [:]
      blobBindings = owners.mapValues { BlobBinding(owner: $0) }
      for video in videos.values {
        blobBindings[video.blobKey] = BlobBinding(
          owner: video.sender,
          video: video.id,
          releasedAt: video.blobReleased ? Timestamp(sinceEpoch: .zero) : nil
        )
      }
    }
    rebuildDerived()
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(videos, forKey: .videos)
    try container.encode(pendingBlobDeletions, forKey: .pendingBlobDeletions)
    try container.encode(droppedCommands, forKey: .droppedCommands)
    try container.encode(blobBindings, forKey: .blobBindings)
    try container.encode(limits, forKey: .limits)
    try container.encode(retention, forKey: .retention)
    try container.encode(clock, forKey: .clock)
    try container.encode(history, forKey: .history)
    try container.encode(nextHistoryPosition, forKey: .nextHistoryPosition)
  }

  public static func == (lhs: VideoServer, rhs: VideoServer) -> Bool {
    lhs.videos == rhs.videos && lhs.pendingBlobDeletions == rhs.pendingBlobDeletions
      && lhs.droppedCommands == rhs.droppedCommands && lhs.blobBindings == rhs.blobBindings
      && lhs.limits == rhs.limits && lhs.retention == rhs.retention && lhs.clock == rhs.clock
      && lhs.history == rhs.history && lhs.nextHistoryPosition == rhs.nextHistoryPosition
  }

  /// Recomputes the footprints and the retention deadlines from the videos and bindings.
  private mutating func rebuildDerived() {
    conversations = [:]
    for item in history.values.sorted(by: { $0.position < $1.position }) {
      conversations[Conversation(item.sender, item.recipient), default: []].append(item.video)
    }
    footprints = [:]
    retirements = DeadlineHeap()
    for video in videos.values.sorted(by: { $0.id < $1.id }) {
      footprints[video.sender, default: Footprint()].tracked += 1
      footprints[video.sender, default: Footprint()].videos.insert(video.id)
      footprints[video.recipient, default: Footprint()].videos.insert(video.id)
      if video.status == .uploaded { footprints[video.sender, default: Footprint()].inFlight += 1 }
      scheduleRetirement(of: video)
    }
    let released = blobBindings.compactMap { key, binding in binding.releasedAt.map { (binding.owner, $0, key) } }
    for (owner, _, key) in released.sorted(by: { ($0.1, $0.2) < ($1.1, $1.2) }) {
      footprints[owner, default: Footprint()].released.append(key)
    }
    for (key, binding) in blobBindings where binding.releasedAt == nil {
      if binding.isUploading { footprints[binding.owner, default: Footprint()].uploading.insert(key) }
      footprints[binding.owner, default: Footprint()].bytes += countedBytes(binding)
    }
  }
}
