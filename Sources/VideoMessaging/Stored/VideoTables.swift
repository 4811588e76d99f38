import EventProtocol
import EventServer

/// The statements of ``StoredVideoServer``, one per question or change, on one transaction: the rules read
/// as rules, and each query names the index it uses.
///
/// On a partitioned log the turns of different partitions run their transactions at the same time
/// (`READ COMMITTED`), and a video's row is changed by its sender's partition, its recipient's and the
/// deadlines' (partition 0): so on PostgreSQL the rows a rule decides from are read `FOR UPDATE` (a
/// second turn waits, then reads what the first committed: a viewed mark does not bring back a video its
/// sender just deleted), and a new blob binding is inserted, not upserted (two users naming one key at
/// once: the second turn fails on the key and its retry is refused, instead of taking the key over).
/// SQLite runs one write transaction at a time and needs neither.
struct VideoTables: Sendable {
  let transaction: any DatabaseTransaction

  /// What a read of rows a rule decides from ends with: a row lock on PostgreSQL.
  private var forUpdate: String { transaction.dialect == .postgres ? " FOR UPDATE" : "" }

  // MARK: - Videos

  private static let videoColumns =
    "id, sender, recipient, blob_key, size, status, blob_released, changed_at, deadline"

  /// The tracked video `id` (by primary key).
  func video(_ id: VideoID) async throws -> VideoServer.TrackedVideo? {
    try await transaction.execute(
      "SELECT \(Self.videoColumns) FROM videos WHERE id = ?\(forUpdate)",
      [.text(id.rawValue)]
    ).first.map(Self.video(row:))
  }

  /// The videos `user` sent or receives, by id (index by sender, index by recipient).
  func videos(of user: UserID) async throws -> [VideoServer.TrackedVideo] {
    let name = SQLValue.text(user.rawValue)
    let rows = try await transaction.execute(
      """
      SELECT \(Self.videoColumns) FROM videos WHERE sender = ?
      UNION SELECT \(Self.videoColumns) FROM videos WHERE recipient = ?
      """,
      [name, name]
    )
    // Sorted here, not by the database: PostgreSQL orders text by its collation, Swift by code points.
    return rows.map(Self.video(row:)).sorted { $0.id < $1.id }
  }

  /// How many videos `user` has tracked, or only those waiting for their recipients (index by sender).
  func count(sentBy user: UserID, waitingOnly: Bool) async throws -> Int {
    let rows =
      waitingOnly
      ? try await transaction.execute(
        "SELECT count(*) AS n FROM videos WHERE sender = ? AND status = ?",
        [.text(user.rawValue), .integer(Int64(VideoStatus.uploaded.rawValue))]
      )
      : try await transaction.execute("SELECT count(*) AS n FROM videos WHERE sender = ?", [.text(user.rawValue)])
    return Int(rows.first?["n"]?.integer ?? 0)
  }

  /// Inserts or replaces `video`, with the deadline its retention gives it.
  func save(_ video: VideoServer.TrackedVideo, deadline: Timestamp) async throws {
    try await transaction.execute(
      """
      INSERT INTO videos (\(Self.videoColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (id) DO UPDATE SET status = excluded.status, blob_released = excluded.blob_released,
        changed_at = excluded.changed_at, deadline = excluded.deadline
      """,
      [
        .text(video.id.rawValue), .text(video.sender.rawValue), .text(video.recipient.rawValue),
        .text(video.blobKey.rawValue), .integer(Int64(video.size)), .integer(Int64(video.status.rawValue)),
        .integer(video.blobReleased ? 1 : 0), .integer(Self.nanoseconds(video.changedAt ?? deadline)),
        .integer(Self.nanoseconds(deadline)),
      ]
    )
  }

  /// Stops tracking `id`.
  func deleteVideo(_ id: VideoID) async throws {
    try await transaction.execute("DELETE FROM videos WHERE id = ?", [.text(id.rawValue)])
  }

  /// Whether a tracked video whose blob is not released names `key` (index by blob key).
  func isClaimed(_ key: BlobKey) async throws -> Bool {
    !(try await transaction.execute(
      "SELECT 1 AS claimed FROM videos WHERE blob_key = ? AND blob_released = 0 LIMIT 1",
      [.text(key.rawValue)]
    )).isEmpty
  }

  /// The earliest retention deadline (the deadline index's first entry).
  func nextDeadline() async throws -> Timestamp? {
    try await transaction.execute("SELECT min(deadline) AS next FROM videos").first?["next"]?.integer
      .map(Self.timestamp(nanoseconds:))
  }

  /// The videos whose deadline is at or before `now`, in (deadline, id) order.
  func videos(dueBy now: Timestamp) async throws -> [VideoServer.TrackedVideo] {
    let rows = try await transaction.execute(
      "SELECT \(Self.videoColumns) FROM videos WHERE deadline <= ?\(forUpdate)",
      [.integer(Self.nanoseconds(now))]
    )
    return rows.map { (deadline: $0["deadline"]?.integer ?? 0, video: Self.video(row: $0)) }
      .sorted { ($0.deadline, $0.video.id) < ($1.deadline, $1.video.id) }.map(\.video)
  }

  // MARK: - Blob bindings

  /// The binding of `key` (by primary key).
  func binding(_ key: BlobKey) async throws -> BlobBinding? {
    try await transaction.execute(
      "SELECT owner, video, size, released_at FROM blob_bindings WHERE blob_key = ?\(forUpdate)",
      [.text(key.rawValue)]
    ).first.map { row in
      BlobBinding(
        owner: UserID(rawValue: row["owner"]?.text ?? ""),
        video: row["video"]?.text.map(VideoID.init(rawValue:)),
        size: row["size"]?.integer.map { Int($0) },
        releasedAt: row["released_at"]?.integer.map(Self.timestamp(nanoseconds:))
      )
    }
  }

  /// Binds `key`, which no binding names: fails (rolling the turn back) when another turn bound it meanwhile.
  func insert(_ binding: BlobBinding, of key: BlobKey) async throws {
    try await transaction.execute(
      "INSERT INTO blob_bindings (blob_key, owner, video, size, released_at) VALUES (?, ?, ?, ?, ?)",
      Self.values(of: binding, key: key)
    )
  }

  /// Replaces the binding of `key`, read (and locked) in this transaction.
  func save(_ binding: BlobBinding, of key: BlobKey) async throws {
    try await transaction.execute(
      """
      INSERT INTO blob_bindings (blob_key, owner, video, size, released_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (blob_key) DO UPDATE SET owner = excluded.owner, video = excluded.video, size = excluded.size,
        released_at = excluded.released_at
      """,
      Self.values(of: binding, key: key)
    )
  }

  private static func values(of binding: BlobBinding, key: BlobKey) -> [SQLValue] {
    [
      .text(key.rawValue), .text(binding.owner.rawValue), binding.video.map { .text($0.rawValue) } ?? .null,
      binding.size.map { .integer(Int64($0)) } ?? .null,
      binding.releasedAt.map { .integer(Self.nanoseconds($0)) } ?? .null,
    ]
  }

  /// Forgets the binding of `key`.
  func deleteBinding(_ key: BlobKey) async throws {
    try await transaction.execute("DELETE FROM blob_bindings WHERE blob_key = ?", [.text(key.rawValue)])
  }

  /// The keys `user` has bound and no video claimed (index by owner).
  func uploads(of user: UserID) async throws -> Set<BlobKey> {
    let rows = try await transaction.execute(
      "SELECT blob_key FROM blob_bindings WHERE owner = ? AND released_at IS NULL AND video IS NULL",
      [.text(user.rawValue)]
    )
    return Set(rows.compactMap { $0["blob_key"]?.text.map(BlobKey.init(rawValue:)) })
  }

  /// The bytes of `user`'s bindings not released: each upload's size, or for a key bound by its notice
  /// alone, its video's declared size (``VideoServer/storedBytes(of:)``).
  func storedBytes(of user: UserID) async throws -> Int {
    let rows = try await transaction.execute(
      """
      SELECT CAST(coalesce(sum(coalesce(b.size, v.size, 0)), 0) AS bigint) AS bytes
      FROM blob_bindings b LEFT JOIN videos v ON v.id = b.video
      WHERE b.owner = ? AND b.released_at IS NULL
      """,
      [.text(user.rawValue)]
    )
    return Int(rows.first?["bytes"]?.integer ?? 0)
  }

  /// How many released keys `owner` has remembered.
  func releasedCount(of owner: UserID) async throws -> Int {
    let rows = try await transaction.execute(
      "SELECT count(*) AS n FROM blob_bindings WHERE owner = ? AND released_at IS NOT NULL",
      [.text(owner.rawValue)]
    )
    return Int(rows.first?["n"]?.integer ?? 0)
  }

  /// `owner`'s released key forgotten first: the earliest release, the least key among equal times.
  func oldestReleased(of owner: UserID) async throws -> BlobKey? {
    let name = SQLValue.text(owner.rawValue)
    let rows = try await transaction.execute(
      """
      SELECT blob_key FROM blob_bindings WHERE owner = ? AND released_at = (
        SELECT min(released_at) FROM blob_bindings WHERE owner = ? AND released_at IS NOT NULL)
      """,
      [name, name]
    )
    return rows.compactMap { $0["blob_key"]?.text.map(BlobKey.init(rawValue:)) }.min()
  }

  // MARK: - Blob deletions

  /// Hands `key` to the janitor for deletion.
  func queueDeletion(_ key: BlobKey) async throws {
    try await transaction.execute(
      "INSERT INTO blob_deletions (blob_key) VALUES (?) ON CONFLICT (blob_key) DO NOTHING",
      [.text(key.rawValue)]
    )
  }

  /// The keys waiting for deletion, and forgets them.
  func takeDeletions() async throws -> [BlobKey] {
    let rows = try await transaction.execute("DELETE FROM blob_deletions RETURNING blob_key")
    return rows.compactMap { $0["blob_key"]?.text.map(BlobKey.init(rawValue:)) }.sorted()
  }

  // MARK: - Rows and times

  private static func video(row: SQLRow) -> VideoServer.TrackedVideo {
    VideoServer.TrackedVideo(
      id: VideoID(rawValue: row["id"]?.text ?? ""),
      sender: UserID(rawValue: row["sender"]?.text ?? ""),
      recipient: UserID(rawValue: row["recipient"]?.text ?? ""),
      blobKey: BlobKey(rawValue: row["blob_key"]?.text ?? ""),
      size: Int(row["size"]?.integer ?? 0),
      status: VideoStatus(rawValue: Int(row["status"]?.integer ?? 0)) ?? .uploaded,
      blobReleased: row["blob_released"]?.integer == 1,
      changedAt: row["changed_at"]?.integer.map(timestamp(nanoseconds:))
    )
  }

  /// A time as the tables keep it: whole nanoseconds since the epoch, clamped to 64 bits.
  static func nanoseconds(_ time: Timestamp) -> Int64 {
    Int64(clamping: time.sinceEpoch.attoseconds / 1_000_000_000)
  }

  static func timestamp(nanoseconds: Int64) -> Timestamp {
    Timestamp(sinceEpoch: .nanoseconds(nanoseconds))
  }
}
