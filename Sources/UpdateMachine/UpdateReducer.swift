import EventProtocol

/// How an app's state follows the server: a pure function applying one event, plus the optimistic effect
/// of the app's own pending writes.
///
/// `apply` must be pure and deterministic: the engine calls it exactly once per event, in id order, and
/// throws the whole batch away (re-registering later) if it throws.
///
/// An app that writes implements ``applyOptimistically(_:to:)``, which names its `Mutation` type; an app
/// that only reads conforms to ``ReadOnlyUpdateReducer`` instead. A reducer that does neither does not
/// compile, and the error points at the reducer.
///
/// ```swift
/// struct NotesReducer: UpdateReducer {
///   var initialState: NoteSnapshot { NoteSnapshot(notes: []) }
///   func apply(_ event: NoteEvent, to state: inout NoteSnapshot) throws(ReducerError) {
///     if case .note(let text) = event { state.notes.append(text) }
///   }
///   func applyOptimistically(_ mutation: NoteCommand, to state: inout NoteSnapshot) {
///     if case .post(let text) = mutation { state.notes.append(text) }
///   }
/// }
/// ```
///
/// ## Changing the state type in an app update
/// The persisted state carries ``stateVersion``. When an update changes `State` so that old data no longer
/// decodes, raise ``stateVersion`` and, to keep the cached state, implement ``migrateState(from:storedVersion:)``.
/// Without a migration, the machine starts stale and re-registers (the server's snapshot is the truth); the
/// outbox is kept either way.
public protocol UpdateReducer<State, Event, Mutation>: Sendable {
  /// The app-level state: what a registration's snapshot holds.
  associatedtype State: Codable & Sendable & Equatable
  /// The events that change it.
  associatedtype Event: EventPayload
  /// The writes the app sends through the outbox; `NoMutation` for a read-only app.
  associatedtype Mutation: Codable & Sendable & Equatable

  /// The state before the first registration (an empty copy of the app's data).
  var initialState: State { get }

  /// The version of `State`'s persisted form; raise it when old data no longer decodes. Default 1.
  var stateVersion: Int { get }

  /// Applies one event to the state.
  /// - Throws: ``ReducerError`` when the event cannot be applied; the engine re-registers rather than skip it.
  func apply(_ event: Event, to state: inout State) throws(ReducerError)

  /// Applies one event to the whole state, as the engine does. Do not implement it: it is
  /// ``apply(_:to:)``, and for a ``PartialUpdateReducer`` also its partial part.
  func reduce(_ event: Event, into state: inout State) throws(ReducerError)

  /// Shows a pending mutation's expected effect on top of the confirmed state.
  func applyOptimistically(_ mutation: Mutation, to state: inout State)

  /// Whether `mutation`, just submitted, makes `older` pointless while `older` was never sent: the outbox
  /// then drops `older` (it is *replaced*), so a device offline for a day sends one playback position per
  /// episode, not thousands. A write that was sent (it may have been applied) is never replaced.
  /// Default: `false`.
  func replaces(_ mutation: Mutation, unsent older: Mutation) -> Bool

  /// Turns a state persisted under an older ``stateVersion`` into today's `State` (default: none).
  /// - Parameters:
  ///   - decoder: A decoder positioned on the stored state.
  ///   - storedVersion: The version it was written with.
  /// - Returns: The migrated state, or `nil` to start stale and re-register.
  func migrateState(from decoder: any Decoder, storedVersion: Int) throws -> State?
}

extension UpdateReducer {
  public var stateVersion: Int { 1 }

  public func reduce(_ event: Event, into state: inout State) throws(ReducerError) {
    try apply(event, to: &state)
  }

  public func replaces(_ mutation: Mutation, unsent older: Mutation) -> Bool { false }

  public func migrateState(from decoder: any Decoder, storedVersion: Int) throws -> State? { nil }
}

/// A reducer for an app that only reads: its `Mutation` is ``NoMutation`` and it has no optimistic effects.
///
/// ```swift
/// struct ScoresReducer: ReadOnlyUpdateReducer {
///   var initialState: Scores { Scores() }
///   func apply(_ event: ScoreEvent, to state: inout Scores) throws(ReducerError) { state.apply(event) }
/// }
/// ```
public protocol ReadOnlyUpdateReducer: UpdateReducer where Mutation == NoMutation {}

extension ReadOnlyUpdateReducer {
  public func applyOptimistically(_ mutation: NoMutation, to state: inout State) {}
}

/// A mutation type with no values, for apps that only read.
public enum NoMutation: Codable, Sendable, Equatable {
  public init(from decoder: any Decoder) throws {
    throw DecodingError.dataCorrupted(
      .init(codingPath: decoder.codingPath, debugDescription: "NoMutation has no values")
    )
  }

  public func encode(to encoder: any Encoder) throws {}
}

/// A reducer could not apply an event.
public struct ReducerError: Error, Hashable, Sendable, CustomStringConvertible {
  /// Why.
  public var reason: String

  /// Creates a ReducerError from its parts.
  public init(_ reason: String) {
    self.reason = reason
  }

  public var description: String { "reducer failed: \(reason)" }
}
