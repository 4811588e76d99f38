import EventProtocol

/// One item of a team's checklist.
public struct ChecklistItem: Codable, Sendable, Equatable {
  /// The row id: increasing in the order items were added (0 for an item shown before the server gave it one).
  public var id: Int
  /// What is to be done.
  public var title: String
  /// Whether it is done.
  public var done: Bool

  /// An item from its parts.
  public init(id: Int, title: String, done: Bool = false) {
    self.id = id
    self.title = title
    self.done = done
  }
}

/// A team's checklist as one member sees it: the team's items, oldest first, and how many writes each member
/// made (a member who joined and wrote nothing has 0).
public struct ChecklistSnapshot: Codable, Sendable, Equatable {
  /// The team's items, by id.
  public var items: [ChecklistItem]
  /// Each member's number of writes, by user id.
  public var writes: [String: Int]

  /// A snapshot from its parts.
  public init(items: [ChecklistItem] = [], writes: [String: Int] = [:]) {
    self.items = items
    self.writes = writes
  }
}

/// What a member asks of the team's checklist.
public enum ChecklistCommand: Codable, Sendable, Equatable {
  /// Joins the user's team: from now on the user hears every write of the team.
  case join
  /// Adds an item to the team's checklist.
  case add(title: String)
  /// Marks one of the team's items done or not done.
  case check(item: Int, done: Bool)
}

/// A write to a team's checklist, delivered to every member of the team: who wrote, their number of writes
/// after it, and the item as the write left it (none for a join).
public struct ChecklistChange: EventPayload {
  public static let knownEventTypes: Set<String> = ["checklist_change"]
  public var eventType: String { "checklist_change" }

  /// Who wrote.
  public var author: UserID
  /// The author's number of writes, this one included.
  public var writes: Int
  /// The item added or checked; `nil` when the author joined.
  public var item: ChecklistItem?
  /// The whole checklist as this write left it, sent only to its author when the write made them a member
  /// (they heard none of the team's writes before): it replaces their copy.
  public var checklist: ChecklistSnapshot?

  /// A change from its parts.
  public init(author: UserID, writes: Int, item: ChecklistItem?, checklist: ChecklistSnapshot? = nil) {
    self.author = author
    self.writes = writes
    self.item = item
    self.checklist = checklist
  }
}

extension UserID {
  /// The team of a user named `team/name` (the part before the first `/`); a user without one is a team of
  /// their own.
  public var team: String { String(rawValue.prefix { $0 != "/" }) }
}
