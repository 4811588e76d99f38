import EventProtocol
import EventServer

/// How long the video server keeps a video, so its memory (and its snapshots) follow the live work, not the
/// history. The server runs it on its own clock (``VideoServer/nextDeadline``).
///
/// - A video nobody downloads within ``waitingForDownload`` **expires**: its blob is deleted, the sender
///   hears `video_untracked` and the recipient `video_incoming_gone`, both with reason `expired`.
/// - A video downloaded but not viewed is forgotten ``afterDownloaded`` after its download, one viewed
///   ``afterViewed`` after its view (**retired**): both users hear `video_untracked`, reason `retired`. Its
///   blob was already deleted at the download.
///
/// With the per-sender bounds of ``VideoServerLimits`` this bounds what the server holds per user by what
/// they sent and received within these windows.
public struct VideoRetention: Codable, Sendable, Hashable {
  /// How long an uploaded video waits for its recipient to download it (30 days by default).
  public var waitingForDownload: Duration = .seconds(30 * 86_400)
  /// How long a downloaded, not yet viewed video stays tracked (30 days by default).
  public var afterDownloaded: Duration = .seconds(30 * 86_400)
  /// How long a viewed video stays tracked, so the sender sees "viewed" (7 days by default).
  public var afterViewed: Duration = .seconds(7 * 86_400)

  /// How many videos a conversation's history keeps; the oldest beyond it go (1,000 by default).
  public var historyPerConversation = 1_000

  /// The defaults.
  public init() {}

  /// A retention with these windows.
  public init(waitingForDownload: Duration, afterDownloaded: Duration, afterViewed: Duration) {
    self.waitingForDownload = waitingForDownload
    self.afterDownloaded = afterDownloaded
    self.afterViewed = afterViewed
  }

  private enum CodingKeys: String, CodingKey {
    case waitingForDownload
    case afterDownloaded
    case afterViewed
    case historyPerConversation
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    waitingForDownload = try container.decode(Duration.self, forKey: .waitingForDownload)
    afterDownloaded = try container.decode(Duration.self, forKey: .afterDownloaded)
    afterViewed = try container.decode(Duration.self, forKey: .afterViewed)
    // Retention written before the history narrows: the default.
    historyPerConversation = try container.decodeIfPresent(Int.self, forKey: .historyPerConversation) ?? 1_000
  }

  /// When a video with this status, reached at `changedAt`, leaves the server.
  public func deadline(for status: VideoStatus, since changedAt: Timestamp) -> Timestamp {
    switch status {
    case .sending, .uploaded: changedAt.advanced(by: waitingForDownload)
    case .downloaded: changedAt.advanced(by: afterDownloaded)
    case .viewed: changedAt.advanced(by: afterViewed)
    }
  }
}

extension VideoServer {
  /// When the next video's retention runs out.
  /// - Complexity: O(1).
  public var nextDeadline: Timestamp? { retirements.nextTime }

  /// Expires and retires every video whose retention ran out by `now`, oldest deadline first.
  public mutating func deadlineReached(at now: Timestamp) -> [Delivery<VideoEvent>] {
    clock = max(clock, now)
    var due: [(Timestamp, VideoID)] = []
    while let (time, id) = retirements.pop(dueAt: now) {
      // Entries of videos that moved on (or were deleted) since they were scheduled are skipped.
      guard let video = videos[id], let changedAt = video.changedAt,
        retention.deadline(for: video.status, since: changedAt) == time
      else { continue }
      due.append((time, id))
    }
    // In (deadline, id) order, whatever order the heap got them in: a server rebuilt from a snapshot
    // forgets them in the same order as the live one did.
    var deliveries: [Delivery<VideoEvent>] = []
    for (_, id) in due.sorted(by: { $0 < $1 }) {
      guard let video = videos[id] else { continue }
      deliveries += forget(video, reason: video.status == .uploaded ? .expired : .retired, now: now)
    }
    return deliveries
  }

  /// Schedules `video`'s retention deadline for its current status.
  mutating func scheduleRetirement(of video: TrackedVideo) {
    guard let changedAt = video.changedAt else { return }
    retirements.push(video.id, at: retention.deadline(for: video.status, since: changedAt))
  }
}
