import EventProtocol
import UpdateMachine

/// The client side of ``TeamChecklist``: one member's copy of the team's checklist.
///
/// A pending `add` shows as an item with id 0 at the end, a pending `check` as the item checked, and each
/// pending write as one more write of the reducer's own user.
public struct ChecklistReducer: UpdateReducer {
  /// The member whose copy this is.
  public var user: UserID

  /// The reducer of `user`'s copy.
  public init(user: UserID) {
    self.user = user
  }

  public var initialState: ChecklistSnapshot { ChecklistSnapshot() }

  public func apply(_ change: ChecklistChange, to state: inout ChecklistSnapshot) throws(ReducerError) {
    if let checklist = change.checklist {
      state = checklist
      return
    }
    state.writes[change.author.rawValue] = change.writes
    guard let item = change.item else { return }
    if let index = state.items.firstIndex(where: { $0.id == item.id }) {
      state.items[index] = item
    } else {
      state.items.append(item)
    }
  }

  public func applyOptimistically(_ command: ChecklistCommand, to state: inout ChecklistSnapshot) {
    switch command {
    case .join:
      if state.writes[user.rawValue] == nil { state.writes[user.rawValue] = 0 }
      return
    case .add(let title):
      state.items.append(ChecklistItem(id: 0, title: title))
    case .check(let id, let done):
      guard let index = state.items.firstIndex(where: { $0.id == id }) else { return }
      state.items[index].done = done
    }
    state.writes[user.rawValue, default: 0] += 1
  }
}
