import EventProtocol
import EventServer

/// A team's shared checklist as a `StoredApplication`: the shape of a team app, where every write reaches
/// the whole team. Its state is three tables of the database that holds the server's log: the items, each
/// member's number of writes, and a log of every write.
///
/// Users are named `team/name` (`EventProtocol/UserID/team`), and the team is the partition key, so on a
/// partitioned log a team's writes, registrations and deliveries stay in one partition
/// (docs/scaling.md, "Choosing the partition key and P"). A user becomes a member with their first command
/// (``ChecklistCommand/join`` or a write): until then their snapshot is empty and they hear nothing, and that
/// command's event brings them the whole checklist (``ChecklistChange/checklist``), so a copy registered
/// before the join stays equal to the tables.
///
/// `event-server --app checklist` serves it on SQLite (`--data-dir`), PostgreSQL (`--postgres`), or a
/// partitioned cluster (`--partitions`); ``ChecklistReducer`` is its client side.
///
/// ```swift
/// let log = try await SQLiteServerLog.open(path: "data/event-server.sqlite")
/// let (server, _) = try await EventServer.serving(TeamChecklist(), from: log, clock: ContinuousClock())
/// ```
public struct TeamChecklist: StoredApplication {
  public typealias Snapshot = ChecklistSnapshot
  public typealias Event = ChecklistChange
  public typealias Command = ChecklistCommand

  /// The checklist's schema: items, each member's write count, and the log of writes, each by team.
  public static let schema: [SchemaMigration] = [
    SchemaMigration(
      version: 1,
      name: "team checklist",
      sqlite: [
        """
        CREATE TABLE checklist_items (id INTEGER PRIMARY KEY AUTOINCREMENT, team TEXT NOT NULL,
          title TEXT NOT NULL, done INTEGER NOT NULL)
        """,
        "CREATE INDEX checklist_items_by_team ON checklist_items (team, id)",
        "CREATE TABLE checklist_members (member TEXT PRIMARY KEY, team TEXT NOT NULL, writes INTEGER NOT NULL)",
        "CREATE INDEX checklist_members_by_team ON checklist_members (team, member)",
        """
        CREATE TABLE checklist_writes (id INTEGER PRIMARY KEY AUTOINCREMENT, team TEXT NOT NULL,
          author TEXT NOT NULL, item INTEGER, action TEXT NOT NULL)
        """,
        "CREATE INDEX checklist_writes_by_author ON checklist_writes (author, id)",
      ],
      postgres: [
        "CREATE TABLE checklist_items (id bigserial PRIMARY KEY, team text NOT NULL, title text NOT NULL, done bigint NOT NULL)",
        "CREATE INDEX checklist_items_by_team ON checklist_items (team, id)",
        "CREATE TABLE checklist_members (member text PRIMARY KEY, team text NOT NULL, writes bigint NOT NULL)",
        "CREATE INDEX checklist_members_by_team ON checklist_members (team, member)",
        """
        CREATE TABLE checklist_writes (id bigserial PRIMARY KEY, team text NOT NULL, author text NOT NULL,
          item bigint, action text NOT NULL)
        """,
        "CREATE INDEX checklist_writes_by_author ON checklist_writes (author, id)",
      ]
    )
  ]

  /// The team checklist on the log's database: its tables made by ``migrations``.
  public init() {}

  public var migrations: [SchemaMigration] { Self.schema }

  /// The user's team: its users share a partition.
  public func partitionKey(for user: UserID) -> String { user.team }

  /// The team's checklist for a member; empty for a user who has not joined (they hear none of the team's
  /// writes yet: the write that makes them a member brings them the whole checklist).
  public func snapshot(for user: UserID, in transaction: any DatabaseTransaction) async throws -> ChecklistSnapshot {
    let member = try await transaction.execute(
      "SELECT member FROM checklist_members WHERE member = ?",
      [.text(user.rawValue)]
    )
    guard !member.isEmpty else { return ChecklistSnapshot() }
    return try await Self.checklist(of: user.team, in: transaction)
  }

  public func handle(
    _ command: ChecklistCommand,
    from user: UserID,
    at now: Timestamp,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<ChecklistChange>] {
    let team = SQLValue.text(user.team)
    let author = SQLValue.text(user.rawValue)
    let item: ChecklistItem?
    let action: String
    switch command {
    case .join:
      item = nil
      action = "join"
    case .add(let title):
      action = "add"
      let rows = try await transaction.execute(
        "INSERT INTO checklist_items (team, title, done) VALUES (?, ?, 0) RETURNING id",
        [team, .text(title)]
      )
      item = ChecklistItem(id: Int(rows.first?["id"]?.integer ?? 0), title: title)
    case .check(let id, let done):
      action = "check"
      let rows = try await transaction.execute(
        "UPDATE checklist_items SET done = ? WHERE id = ? AND team = ? RETURNING title",
        [.integer(done ? 1 : 0), .integer(Int64(id)), team]
      )
      guard let title = rows.first?["title"]?.text else {
        throw CommandRejection("the team \(user.team) has no item \(id)")
      }
      item = ChecklistItem(id: id, title: title, done: done)
    }
    // A user's first command makes them a member (`joined`): a write counts itself in one statement for a
    // member, and inserts the member, counted, for a newcomer.
    let writes: Int
    let joined: Bool
    if case .join = command {
      joined = try await !transaction.execute(
        """
        INSERT INTO checklist_members (member, team, writes) VALUES (?, ?, 0) ON CONFLICT (member) DO NOTHING
        RETURNING member
        """,
        [author, team]
      ).isEmpty
      writes =
        joined
        ? 0
        : Int(
          try await transaction.execute("SELECT writes FROM checklist_members WHERE member = ?", [author])
            .first?["writes"]?.integer ?? 0
        )
    } else {
      let counted = try await transaction.execute(
        "UPDATE checklist_members SET writes = writes + 1 WHERE member = ? RETURNING writes",
        [author]
      )
      if let count = counted.first?["writes"]?.integer {
        writes = Int(count)
        joined = false
      } else {
        try await transaction.execute(
          "INSERT INTO checklist_members (member, team, writes) VALUES (?, ?, 1)",
          [author, team]
        )
        writes = 1
        joined = true
      }
      try await transaction.execute(
        "INSERT INTO checklist_writes (team, author, item, action) VALUES (?, ?, ?, ?)",
        [team, author, .integer(Int64(item?.id ?? 0)), .text(action)]
      )
    }
    let members = try await transaction.execute(
      "SELECT member FROM checklist_members WHERE team = ? ORDER BY member",
      [team]
    ).compactMap { row in row["member"]?.text.map { UserID($0) } }
    let change = ChecklistChange(author: user, writes: writes, item: item)
    guard joined else { return [Delivery(to: members, event: change)] }
    // A new member heard none of the team's writes before this one: this one brings the whole checklist as
    // it now is, the others hear the change.
    var welcome = change
    welcome.checklist = try await Self.checklist(of: user.team, in: transaction)
    return [
      Delivery(to: [user], event: welcome),
      Delivery(to: members.filter { $0 != user }, event: change),
    ]
  }

  /// A team's checklist as its tables hold it, read in `transaction`: what a registration returns, and the
  /// truth a check compares clients with.
  public static func checklist(
    of team: String,
    in transaction: any DatabaseTransaction
  ) async throws -> ChecklistSnapshot {
    let items = try await transaction.execute(
      "SELECT id, title, done FROM checklist_items WHERE team = ? ORDER BY id",
      [.text(team)]
    ).map {
      ChecklistItem(
        id: Int($0["id"]?.integer ?? 0),
        title: $0["title"]?.text ?? "",
        done: $0["done"]?.integer == 1
      )
    }
    var writes: [String: Int] = [:]
    for row in try await transaction.execute(
      "SELECT member, writes FROM checklist_members WHERE team = ?",
      [.text(team)]
    ) {
      if let member = row["member"]?.text { writes[member] = Int(row["writes"]?.integer ?? 0) }
    }
    return ChecklistSnapshot(items: items, writes: writes)
  }

  /// How many writes the log of writes holds for each of `team`'s authors, read in `transaction`: equal to
  /// the members' counts when no write was applied twice or lost between the tables.
  public static func loggedWrites(
    of team: String,
    in transaction: any DatabaseTransaction
  ) async throws -> [String: Int] {
    var logged: [String: Int] = [:]
    for row in try await transaction.execute(
      "SELECT author, count(*) AS n FROM checklist_writes WHERE team = ? GROUP BY author",
      [.text(team)]
    ) {
      if let author = row["author"]?.text { logged[author] = Int(row["n"]?.integer ?? 0) }
    }
    return logged
  }
}
