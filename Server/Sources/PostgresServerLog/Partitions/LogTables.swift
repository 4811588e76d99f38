/// The tables and the notification channel of one partition of the PostgreSQL log.
///
/// Partition 0 is the log of a server that is not partitioned (`event_log_meta`, `event_log`,
/// `event_snapshot`, channel `event_log`), so a database created before partitions is partition 0 of a
/// log of one partition. Partition *p* > 0 has tables of its own, suffixed `_p`*p*: its own counter row
/// (its appends wait for no other partition's), its own records and its own snapshot.
struct LogTables: Sendable, Hashable {
  /// The partition, from 0.
  let partition: Int

  private var suffix: String { partition == 0 ? "" : "_p\(partition)" }

  /// The one-row table whose row orders the partition's appends (`id = 1`, `last_position`).
  var meta: String { "event_log_meta" + suffix }
  /// The records: `(position bigint PRIMARY KEY, record bytea)`.
  var records: String { "event_log" + suffix }
  /// The newest snapshot: `(id = 1, position, state bytea)`.
  var snapshot: String { "event_snapshot" + suffix }
  /// The channel each append notifies with its last position.
  var channel: String { "event_log" + suffix }
  /// The channel a message left in the partition's inbox notifies.
  var inboxChannel: String { "event_inbox_p\(partition)" }
  /// The messages partitions leave for each other (one table for all: `partition`, `id`, `message`).
  static var inbox: String { "event_inbox" }
}
