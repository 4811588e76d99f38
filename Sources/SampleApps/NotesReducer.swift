import EventProtocol
import UpdateMachine

/// The client side of ``NoteBoard``: one user's received notes.
///
/// A note whose text is ``poison`` makes `apply` throw, to test reducer failures. A pending `post` to the
/// reducer's own user shows optimistically as the note itself.
public struct NotesReducer: UpdateReducer {
  /// The note text the reducer refuses.
  public static let poison = "poison"

  /// The user whose notes these are.
  public var user: UserID

  /// The reducer of `user`'s notes.
  public init(user: UserID) {
    self.user = user
  }

  public var initialState: NoteSnapshot { NoteSnapshot(notes: []) }

  public func apply(_ event: NoteEvent, to state: inout NoteSnapshot) throws(ReducerError) {
    switch event {
    case .note(let text) where text == Self.poison: throw ReducerError("poisoned note")
    case .note(let text): state.notes.append(text)
    case .ping: break
    }
  }

  public func applyOptimistically(_ mutation: NoteBoard.Command, to state: inout NoteSnapshot) {
    if case .post(let text, let recipients) = mutation, recipients.contains(user) { state.notes.append(text) }
  }
}
