import EventServer

extension StoredVideoServer {
  /// The video service's tables, version by version (`docs/video-messaging.md`, "Stored in your database"):
  ///
  /// - `videos`: one row per tracked video, with its retention `deadline` (indexed: the next deadline is
  ///   the index's first entry) and indexes by sender and by recipient (what a snapshot reads).
  /// - `blob_bindings`: one row per blob key bound to its uploader (``BlobBinding``), indexed by owner and
  ///   release time (uploads in progress, bytes, the released keys remembered).
  /// - `blob_deletions`: keys released and not yet deleted from blob storage (the janitor's work).
  /// - `video_history`: one row per video in a conversation's history, numbered in the order sent
  ///   (`position`), indexed by conversation and by each participant, which is what fetches read.
  ///
  /// Version 2 adds the blob contents of ``DatabaseBlobStore`` (a cluster's shared blob storage):
  ///
  /// - `blob_contents`: one row per blob, partial (`complete` 0) or complete (1), with its length and, once
  ///   complete, when it was completed.
  /// - `blob_chunks`: the bytes of each append at their offset (`start`), partial or complete with their blob.
  ///
  /// Version 3 adds captions: `video_history.caption`, `NULL` for none (every video of a database that
  /// version 2 wrote has none).
  ///
  /// Times are nanoseconds since the Unix epoch; statuses are ``VideoStatus`` raw values.
  public static let schema: [SchemaMigration] = [
    SchemaMigration(
      version: 1,
      name: "videos",
      sqlite: [
        """
        CREATE TABLE videos (id TEXT PRIMARY KEY, sender TEXT NOT NULL, recipient TEXT NOT NULL,
          blob_key TEXT NOT NULL, size INTEGER NOT NULL, status INTEGER NOT NULL,
          blob_released INTEGER NOT NULL, changed_at INTEGER NOT NULL, deadline INTEGER NOT NULL)
        """,
        "CREATE INDEX videos_by_sender ON videos (sender, status)",
        "CREATE INDEX videos_by_recipient ON videos (recipient)",
        "CREATE INDEX videos_by_deadline ON videos (deadline)",
        "CREATE INDEX videos_by_blob_key ON videos (blob_key)",
        """
        CREATE TABLE blob_bindings (blob_key TEXT PRIMARY KEY, owner TEXT NOT NULL, video TEXT,
          size INTEGER, released_at INTEGER)
        """,
        "CREATE INDEX blob_bindings_by_owner ON blob_bindings (owner, released_at)",
        "CREATE TABLE blob_deletions (blob_key TEXT PRIMARY KEY)",
        """
        CREATE TABLE video_history (position INTEGER PRIMARY KEY AUTOINCREMENT, video TEXT NOT NULL UNIQUE,
          sender TEXT NOT NULL, recipient TEXT NOT NULL, first_user TEXT NOT NULL, second_user TEXT NOT NULL,
          status INTEGER NOT NULL)
        """,
        "CREATE INDEX video_history_by_conversation ON video_history (first_user, second_user, position)",
        "CREATE INDEX video_history_by_second_user ON video_history (second_user, position)",
      ],
      postgres: [
        """
        CREATE TABLE videos (id text PRIMARY KEY, sender text NOT NULL, recipient text NOT NULL,
          blob_key text NOT NULL, size bigint NOT NULL, status bigint NOT NULL,
          blob_released bigint NOT NULL, changed_at bigint NOT NULL, deadline bigint NOT NULL)
        """,
        "CREATE INDEX videos_by_sender ON videos (sender, status)",
        "CREATE INDEX videos_by_recipient ON videos (recipient)",
        "CREATE INDEX videos_by_deadline ON videos (deadline)",
        "CREATE INDEX videos_by_blob_key ON videos (blob_key)",
        """
        CREATE TABLE blob_bindings (blob_key text PRIMARY KEY, owner text NOT NULL, video text,
          size bigint, released_at bigint)
        """,
        "CREATE INDEX blob_bindings_by_owner ON blob_bindings (owner, released_at)",
        "CREATE TABLE blob_deletions (blob_key text PRIMARY KEY)",
        """
        CREATE TABLE video_history (position bigserial PRIMARY KEY, video text NOT NULL UNIQUE,
          sender text NOT NULL, recipient text NOT NULL, first_user text NOT NULL, second_user text NOT NULL,
          status bigint NOT NULL)
        """,
        "CREATE INDEX video_history_by_conversation ON video_history (first_user, second_user, position)",
        "CREATE INDEX video_history_by_second_user ON video_history (second_user, position)",
      ]
    ),
    SchemaMigration(
      version: 2,
      name: "video.blob_contents",
      sqlite: [
        """
        CREATE TABLE blob_contents (blob_key TEXT NOT NULL, complete INTEGER NOT NULL, length INTEGER NOT NULL,
          created_at INTEGER, PRIMARY KEY (blob_key, complete))
        """,
        """
        CREATE TABLE blob_chunks (blob_key TEXT NOT NULL, complete INTEGER NOT NULL, start INTEGER NOT NULL,
          bytes BLOB NOT NULL, PRIMARY KEY (blob_key, complete, start))
        """,
      ],
      postgres: [
        """
        CREATE TABLE blob_contents (blob_key text NOT NULL, complete bigint NOT NULL, length bigint NOT NULL,
          created_at bigint, PRIMARY KEY (blob_key, complete))
        """,
        """
        CREATE TABLE blob_chunks (blob_key text NOT NULL, complete bigint NOT NULL, start bigint NOT NULL,
          bytes bytea NOT NULL, PRIMARY KEY (blob_key, complete, start))
        """,
      ]
    ),
    SchemaMigration(
      version: 3,
      name: "video.captions",
      sqlite: ["ALTER TABLE video_history ADD COLUMN caption TEXT"],
      postgres: ["ALTER TABLE video_history ADD COLUMN caption text"]
    ),
  ]
}
