import EventProtocol

/// How an app's state follows the server: a pure function applying one event, plus the optimistic effect
/// of the app's own pending writes.
///
/// `apply` must be pure and deterministic: the engine calls it exactly once per event, in id order, and
/// throws the whole batch away (re-registering later) if it throws.
///
/// ```swift
/// struct NotesReducer: UpdateReducer {
///   var initialState: NoteSnapshot { NoteSnapshot(notes: []) }
///   func apply(_ event: NoteEvent, to state: inout NoteSnapshot) throws(ReducerError) {
///     if case .note(let text) = event { state.notes.append(text) }
///   }
/// }
/// ```
public protocol UpdateReducer<State, Event, Mutation>: Sendable {
  /// The app-level state: what a registration's snapshot holds.
  associatedtype State: Codable & Sendable & Equatable
  /// The events that change it.
  associatedtype Event: EventPayload
  /// The writes the app sends through the outbox; `NoMutation` for a read-only app.
  associatedtype Mutation: Codable & Sendable & Equatable = NoMutation

  /// The state before the first registration (an empty copy of the app's data).
  var initialState: State { get }

  /// Applies one event to the state.
  /// - Throws: ``ReducerError`` when the event cannot be applied; the engine re-registers rather than skip it.
  func apply(_ event: Event, to state: inout State) throws(ReducerError)

  /// Shows a pending mutation's expected effect on top of the confirmed state (default: none).
  func applyOptimistically(_ mutation: Mutation, to state: inout State)
}

extension UpdateReducer {
  public func applyOptimistically(_ mutation: Mutation, to state: inout State) {}
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
