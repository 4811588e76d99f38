import EventProtocol
import EventServer

/// The video service as a `StoredApplication`: the same rules, commands, events, snapshots and fetched
/// pages as ``VideoServer`` (clients cannot tell them apart, and a test holds the two equal on random
/// histories), with the videos, the blob bindings, the blobs to delete and the conversations' histories in
/// tables of the database that holds the server's log (``schema``).
///
/// What differs: the latest dropped commands are not kept (``VideoServer/droppedCommands`` is for logs of
/// the in-memory server), and the blob routes and the janitor read the bindings from the tables through
/// ``StoredVideoBlobLedger``.
///
/// `event-server --app videos` serves it on SQLite (`--data-dir`) or PostgreSQL (`--postgres`); the
/// simulation, the demo and the in-process server keep the in-memory ``VideoServer``.
///
/// ```swift
/// let log = try await SQLiteServerLog.open(path: "data/event-server.sqlite")
/// let (server, _) = try await EventServer.serving(StoredVideoServer(), from: log, clock: ContinuousClock())
/// ```
public struct StoredVideoServer: StoredApplication {
  public typealias Snapshot = VideoSnapshot
  public typealias Event = VideoEvent
  public typealias Command = VideoCommand
  public typealias FetchedItem = VideoHistoryItem
  typealias TrackedVideo = VideoServer.TrackedVideo

  /// The bounds on what each user may keep.
  public let limits: VideoServerLimits
  /// How long videos are kept.
  public let retention: VideoRetention

  /// The service with these bounds and this retention.
  public init(limits: VideoServerLimits = VideoServerLimits(), retention: VideoRetention = VideoRetention()) {
    self.limits = limits
    self.retention = retention
  }

  public var migrations: [SchemaMigration] { Self.schema }

  public func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> VideoSnapshot {
    VideoServer.snapshot(for: user, of: try await VideoTables(transaction: transaction).videos(of: user))
  }

  public func handle(
    _ command: VideoCommand,
    from user: UserID,
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<VideoEvent>] {
    let tables = VideoTables(transaction: transaction)
    switch command {
    case .uploaded(let upload):
      return try await uploaded(upload, from: user, now: now, in: tables)
    case .downloaded(let video):
      try VideoServer.check(video.rawValue, "a video id", limits.maximumVideoIDBytes)
      return try await advance(video, to: .downloaded, by: user, now: now, in: tables)
    case .viewed(let video):
      try VideoServer.check(video.rawValue, "a video id", limits.maximumVideoIDBytes)
      return try await advance(video, to: .viewed, by: user, now: now, in: tables)
    case .deleted(let video):
      try VideoServer.check(video.rawValue, "a video id", limits.maximumVideoIDBytes)
      guard let tracked = try await tables.video(video) else { return [] }
      guard tracked.sender == user else { throw CommandRejection("only the sender of \(video) may delete it") }
      return try await forget(tracked, reason: .deleted, now: now, in: tables)
    case .captioned(let video, let caption):
      try VideoServer.check(video.rawValue, "a video id", limits.maximumVideoIDBytes)
      return try await recaption(video, to: caption, by: user, in: tables)
    case .uploadStarted(let key):
      try await bind(key, to: user, in: tables)
      return []
    case .uploadCompleted(let key, let size):
      try await completed(key, size: size, by: user, in: tables)
      return []
    case .uploadAbandoned(let key):
      try await abandoned(key, by: user, now: now, in: tables)
      return []
    }
  }

  /// A page of a conversation's history, as ``VideoServer/fetch(_:for:)`` answers it, read on the history's
  /// indexes: the page costs the same whatever the tables hold.
  public func fetch(
    _ request: FetchRequest,
    for user: UserID,
    in transaction: any DatabaseTransaction
  ) async throws -> FetchPage<VideoHistoryItem> {
    let conversation = try VideoServer.conversation(of: request.narrow, for: user)
    return try await VideoTables(transaction: transaction).historyPage(request, of: conversation, for: user)
  }

  public func nextDeadline(in transaction: any DatabaseTransaction) async throws -> Timestamp? {
    try await VideoTables(transaction: transaction).nextDeadline()
  }

  /// Expires and retires every video whose retention ran out by `now`, in (deadline, id) order, as
  /// ``VideoServer/deadlineReached(at:)`` does.
  public func deadlineReached(
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<VideoEvent>] {
    let tables = VideoTables(transaction: transaction)
    var deliveries: [Delivery<VideoEvent>] = []
    for video in try await tables.videos(dueBy: now) {
      deliveries += try await forget(
        video,
        reason: video.status == .uploaded ? .expired : .retired,
        now: now,
        in: tables
      )
    }
    return deliveries
  }

  // MARK: - Videos

  private func uploaded(
    _ upload: VideoUpload,
    from user: UserID,
    now: Timestamp,
    in tables: VideoTables
  ) async throws -> [Delivery<VideoEvent>] {
    try VideoServer.check(upload.video.rawValue, "a video id", limits.maximumVideoIDBytes)
    try VideoServer.check(upload.recipient.rawValue, "a recipient", limits.maximumUserIDBytes)
    try VideoServer.check(upload.blobKey.rawValue, "a blob key", limits.maximumBlobKeyBytes)
    let caption = try VideoServer.captionText(upload.caption, limits: limits)
    // An id still tracked or still in its conversation's history is taken (as in ``VideoServer``).
    if let known = try await tables.sender(of: upload.video) {
      guard known == user else { throw CommandRejection("video \(upload.video) belongs to another sender") }
      return []
    }
    guard (0...limits.maximumVideoBytes).contains(upload.size) else {
      throw CommandRejection("a video is 0 to \(limits.maximumVideoBytes) bytes")
    }
    guard try await tables.count(sentBy: user, waitingOnly: false) < limits.maximumVideosPerSender else {
      throw CommandRejection("you have \(limits.maximumVideosPerSender) videos: delete some first")
    }
    guard try await tables.count(sentBy: user, waitingOnly: true) < limits.maximumVideosInFlightPerSender else {
      throw CommandRejection(
        "you have \(limits.maximumVideosInFlightPerSender) videos waiting for their recipients: try again later"
      )
    }
    try await claim(upload, by: user, in: tables)
    let video = TrackedVideo(uploaded: upload, from: user, at: now)
    try await tables.save(video, deadline: retention.deadline(for: .uploaded, since: now))
    let position = try await tables.recordHistory(of: upload, from: user, caption: caption)
    return VideoServer.uploadDeliveries(upload, from: user, position: position, caption: caption)
      + (try await trimHistory(of: VideoServer.Conversation(user, upload.recipient), in: tables))
  }

  private func advance(
    _ id: VideoID,
    to status: VideoStatus,
    by user: UserID,
    now: Timestamp,
    in tables: VideoTables
  ) async throws -> [Delivery<VideoEvent>] {
    guard var video = try await tables.video(id) else { return [] }
    guard video.recipient == user else { throw CommandRejection("only the recipient of \(id) may mark it \(status)") }
    guard status > video.status else { return [] }
    let wasWaiting = video.status == .uploaded
    video.status = status
    video.changedAt = now
    let deliveries = VideoServer.advanceDeliveries(video, wasWaiting: wasWaiting)
    if wasWaiting { try await releaseBlob(of: &video, now: now, in: tables) }
    try await tables.save(video, deadline: retention.deadline(for: status, since: now))
    try await tables.setHistoryStatus(of: id, to: status)
    return deliveries
  }

  /// Sets, changes or removes a caption, as ``VideoServer`` does (a video in no history: nothing).
  private func recaption(
    _ id: VideoID,
    to caption: String,
    by user: UserID,
    in tables: VideoTables
  ) async throws -> [Delivery<VideoEvent>] {
    let text = try VideoServer.captionText(caption, limits: limits)
    guard var item = try await tables.historyItem(id) else { return [] }
    guard item.sender == user else { throw CommandRejection("only the sender of \(id) may caption it") }
    guard item.caption != text else { return [] }
    item.caption = text
    try await tables.setCaption(of: id, to: text)
    return VideoServer.captionDeliveries(item)
  }

  /// Stops tracking `video` and tells both users why (``VideoServer/forget(_:reason:now:)``).
  private func forget(
    _ tracked: TrackedVideo,
    reason: VideoGoneReason,
    now: Timestamp,
    in tables: VideoTables
  ) async throws -> [Delivery<VideoEvent>] {
    var video = tracked
    let deliveries = VideoServer.forgetDeliveries(video, reason: reason)
    try await releaseBlob(of: &video, now: now, in: tables)
    try await tables.deleteVideo(video.id)
    if reason != .retired { try await tables.forgetHistory(of: video.id) }
    return deliveries
  }

  /// Lets the oldest videos of `conversation` no longer tracked go while it holds more than the retention
  /// allows; both users hear of each.
  private func trimHistory(
    of conversation: VideoServer.Conversation,
    in tables: VideoTables
  ) async throws -> [Delivery<VideoEvent>] {
    let excess = try await tables.historyCount(of: conversation) - retention.historyPerConversation
    guard excess > 0 else { return [] }
    let users =
      conversation.first == conversation.second ? [conversation.first] : [conversation.first, conversation.second]
    var deliveries: [Delivery<VideoEvent>] = []
    for video in try await tables.oldestUntracked(in: conversation, limit: excess) {
      try await tables.forgetHistory(of: video)
      deliveries.append(Delivery(to: users, event: .historyTrimmed(VideoGone(video: video, reason: nil))))
    }
    return deliveries
  }
}
