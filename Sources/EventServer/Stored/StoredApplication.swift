import EventProtocol

/// An application whose state lives in tables of its own, in the database that also holds the server's input
/// log: what a team serves in production, where the truth must be queryable, backed up with the database's
/// tools, and larger than memory.
///
/// Each request runs in one database transaction that also holds the input's log records and the mutation's
/// decision, so a command's table changes, its events and its exactly-once memory commit together or not at
/// all, and commit is acknowledgement:
/// - ``handle(_:from:at:in:)`` changes the tables and returns the events to deliver. Throwing
///   ``CommandRejection`` rolls back what it wrote, and the rejection is remembered (a retry meets the same
///   answer); throwing anything else rolls back and decides nothing (the client retries).
/// - ``snapshot(for:in:)`` reads what a registration returns, in order with this server's other inputs, so
///   the queue created with it starts exactly after the last input the snapshot reflects.
/// - ``fetch(_:for:in:)`` reads one page of a narrow the same way, atomic with the caller's queue.
/// - ``nextDeadline(in:)`` and ``deadlineReached(at:in:)`` are its time-driven work, committed like a command.
///
/// The server holds the queues in memory and in its log, as for an in-memory ``ServerApplication``; only the
/// application's state moves to tables. Serve one with ``EventServer/serving(_:from:configuration:clock:anchor:random:pushGateway:snapshots:)``.
///
/// ```swift
/// struct Counter: StoredApplication {
///   var migrations: [SchemaMigration] {
///     [SchemaMigration(version: 1, name: "counter",
///       sqlite: ["CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)",
///                "INSERT INTO counter VALUES (1, 0)"],
///       postgres: ["CREATE TABLE counter (id integer PRIMARY KEY, value bigint NOT NULL)",
///                  "INSERT INTO counter VALUES (1, 0)"])]
///   }
///   func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> Int {
///     let rows = try await transaction.execute("SELECT value FROM counter WHERE id = 1")
///     return Int(rows.first?["value"]?.integer ?? 0)
///   }
///   func handle(_ command: Int, from user: UserID, at now: Timestamp,
///               in transaction: any DatabaseTransaction) async throws -> [Delivery<Tick>] {
///     let rows = try await transaction.execute(
///       "UPDATE counter SET value = value + ? WHERE id = 1 RETURNING value", [.integer(Int64(command))])
///     return [Delivery(to: ["alice", "bob"], event: Tick(value: Int(rows.first?["value"]?.integer ?? 0)))]
///   }
/// }
/// ```
public protocol StoredApplication: Sendable {
  /// What a registration returns: the application's state as one user sees it.
  associatedtype Snapshot: Codable & Sendable & Equatable
  /// The events the application pushes to queues.
  associatedtype Event: EventPayload
  /// What users ask the application to do; it crosses the wire, and the server digests it to tell a repeated
  /// write from a different one.
  associatedtype Command: Codable & Sendable & Equatable
  /// The items a fetch answers with; ``NoFetchedItem`` when the application answers no fetch.
  associatedtype FetchedItem: Codable & Sendable & Equatable = NoFetchedItem

  /// The schema of the application's tables, in order: applied at start, each once, in its own transaction
  /// (see ``SchemaMigration``).
  var migrations: [SchemaMigration] { get }

  /// The state as `user` sees it now, read in `transaction`.
  /// - Throws: ``DatabaseError`` (or any error) when it cannot be read: the registration fails, and nothing
  ///   is created.
  func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> Snapshot

  /// Applies `command` from `user` at the server's time `now`, in `transaction`, and returns the events to
  /// push and who receives each.
  /// - Throws: ``CommandRejection`` to refuse the command (its changes roll back; the refusal is remembered
  ///   for the mutation's repeats); any other error rolls back and decides nothing.
  func handle(
    _ command: Command,
    from user: UserID,
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<Event>]

  /// One page of a narrow as `user` sees it now, read in `transaction` in order with this server's other
  /// inputs, so it is atomic with the caller's queue (see ``ServerApplication/fetch(_:for:)``). By default no
  /// narrow can be fetched.
  /// - Throws: ``CommandRejection`` for a narrow the application does not know (answered `BAD_REQUEST`).
  func fetch(
    _ request: FetchRequest,
    for user: UserID,
    in transaction: any DatabaseTransaction
  ) async throws -> FetchPage<FetchedItem>

  /// The key that places `user` in a partition of a partitioned log (``PartitionMap/partition(ofKey:)``):
  /// users with the same key share a partition, so the writes, registrations and deliveries among them stay
  /// in one partition's turns, and only deliveries to users of other keys cross partitions (through their
  /// inboxes). Return what your data is shared by: the user's team, tenant or document. By default the
  /// user's own id: each user hashed apart.
  ///
  /// It must be stable: the same key for a user for as long as the log exists (a user's queues and their
  /// clients' exactly-once memory live in the user's partition; a new key would leave them behind). It is
  /// called for every request and every recipient, so keep it cheap and free of I/O (a lookup in memory, or
  /// a key the user id itself carries, such as `team/alice`).
  func partitionKey(for user: UserID) -> String

  /// The earliest server time at which the application has work of its own, read after every input it
  /// handles (keep an index: it must be cheap). `nil` when it has none. By default, `nil`.
  func nextDeadline(in transaction: any DatabaseTransaction) async throws -> Timestamp?

  /// The server's clock reached ``nextDeadline(in:)``: does what came due by `now` in `transaction` and
  /// returns the events to push. It commits like a command. By default, nothing.
  func deadlineReached(at now: Timestamp, in transaction: any DatabaseTransaction) async throws -> [Delivery<Event>]
}

extension StoredApplication {
  public func fetch(
    _ request: FetchRequest,
    for user: UserID,
    in transaction: any DatabaseTransaction
  ) async throws -> FetchPage<FetchedItem> {
    throw CommandRejection("this application answers no fetch")
  }

  public func nextDeadline(in transaction: any DatabaseTransaction) async throws -> Timestamp? { nil }

  public func partitionKey(for user: UserID) -> String { user.rawValue }

  public func deadlineReached(
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<Event>] { [] }
}
