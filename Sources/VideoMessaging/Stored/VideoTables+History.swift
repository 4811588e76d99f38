import EventProtocol
import EventServer

/// The statements on `video_history`: each conversation's videos in the order they were sent.
extension VideoTables {
  private static let historyColumns = "position, video, sender, recipient, status, caption"

  /// Records `upload` from `sender` in its conversation's history; returns its position (increasing in the
  /// order videos are sent, never reused).
  func recordHistory(of upload: VideoUpload, from sender: UserID, caption: String?) async throws -> Int {
    let conversation = VideoServer.Conversation(sender, upload.recipient)
    let rows = try await transaction.execute(
      """
      INSERT INTO video_history (video, sender, recipient, first_user, second_user, status, caption)
      VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING position
      """,
      [
        .text(upload.video.rawValue), .text(sender.rawValue), .text(upload.recipient.rawValue),
        .text(conversation.first.rawValue), .text(conversation.second.rawValue),
        .integer(Int64(VideoStatus.uploaded.rawValue)), caption.map(SQLValue.text) ?? .null,
      ]
    )
    return Int(rows.first?["position"]?.integer ?? 0)
  }

  /// Who sent `video`, while it is tracked or in its conversation's history: its id is taken until then.
  func sender(of video: VideoID) async throws -> UserID? {
    let rows = try await transaction.execute(
      "SELECT sender FROM videos WHERE id = ? UNION SELECT sender FROM video_history WHERE video = ?",
      [.text(video.rawValue), .text(video.rawValue)]
    )
    return rows.first?["sender"]?.text.map(UserID.init(rawValue:))
  }

  /// Records the status a video of the history reached.
  func setHistoryStatus(of video: VideoID, to status: VideoStatus) async throws {
    try await transaction.execute(
      "UPDATE video_history SET status = ? WHERE video = ?",
      [.integer(Int64(status.rawValue)), .text(video.rawValue)]
    )
  }

  /// The history's entry for `video`, if it is in one.
  func historyItem(_ video: VideoID) async throws -> VideoHistoryItem? {
    try await transaction.execute(
      "SELECT \(Self.historyColumns) FROM video_history WHERE video = ?",
      [.text(video.rawValue)]
    ).first.map(Self.historyItem(row:))
  }

  /// Records the caption of a video of the history (`nil`: none).
  func setCaption(of video: VideoID, to caption: String?) async throws {
    try await transaction.execute(
      "UPDATE video_history SET caption = ? WHERE video = ?",
      [caption.map(SQLValue.text) ?? .null, .text(video.rawValue)]
    )
  }

  /// Drops `video` from the history.
  func forgetHistory(of video: VideoID) async throws {
    try await transaction.execute("DELETE FROM video_history WHERE video = ?", [.text(video.rawValue)])
  }

  /// How many videos `conversation`'s history holds (index by conversation).
  func historyCount(of conversation: VideoServer.Conversation) async throws -> Int {
    let rows = try await transaction.execute(
      "SELECT count(*) AS n FROM video_history WHERE first_user = ? AND second_user = ?",
      [.text(conversation.first.rawValue), .text(conversation.second.rawValue)]
    )
    return Int(rows.first?["n"]?.integer ?? 0)
  }

  /// The oldest `limit` videos of `conversation`'s history that are no longer tracked (what trimming lets go).
  func oldestUntracked(in conversation: VideoServer.Conversation, limit: Int) async throws -> [VideoID] {
    let rows = try await transaction.execute(
      """
      SELECT h.video AS video FROM video_history h
      WHERE h.first_user = ? AND h.second_user = ? AND NOT EXISTS (SELECT 1 FROM videos v WHERE v.id = h.video)
      ORDER BY h.position LIMIT ?
      """,
      [.text(conversation.first.rawValue), .text(conversation.second.rawValue), .integer(Int64(limit))]
    )
    return rows.compactMap { $0["video"]?.text.map(VideoID.init(rawValue:)) }
  }

  /// A page of `conversation`'s history, or of every conversation of `user` when `conversation` is `nil`,
  /// read as two range queries around the anchor on the conversation's (or the participant's) index.
  func historyPage(
    _ request: FetchRequest,
    of conversation: VideoServer.Conversation?,
    for user: UserID
  ) async throws -> FetchPage<VideoHistoryItem> {
    let (filter, values): (String, [SQLValue])
    if let conversation {
      filter = "first_user = ? AND second_user = ?"
      values = [.text(conversation.first.rawValue), .text(conversation.second.rawValue)]
    } else {
      filter = "(first_user = ? OR second_user = ?)"
      values = [.text(user.rawValue), .text(user.rawValue)]
    }
    return try await FetchPage.reading(request) { split, limit in
      try await transaction.execute(
        "SELECT \(Self.historyColumns) FROM video_history WHERE \(filter) AND position < ? ORDER BY position DESC LIMIT ?",
        values + [.integer(split), .integer(Int64(limit))]
      ).map(Self.historyItem(row:))
    } after: { split, limit in
      try await transaction.execute(
        "SELECT \(Self.historyColumns) FROM video_history WHERE \(filter) AND position >= ? ORDER BY position LIMIT ?",
        values + [.integer(split), .integer(Int64(limit))]
      ).map(Self.historyItem(row:))
    } position: {
      $0.position
    }
  }

  private static func historyItem(row: SQLRow) -> VideoHistoryItem {
    VideoHistoryItem(
      video: VideoID(rawValue: row["video"]?.text ?? ""),
      sender: UserID(rawValue: row["sender"]?.text ?? ""),
      recipient: UserID(rawValue: row["recipient"]?.text ?? ""),
      status: VideoStatus(rawValue: Int(row["status"]?.integer ?? 0)) ?? .uploaded,
      position: Int(row["position"]?.integer ?? 0),
      caption: row["caption"]?.text
    )
  }
}
