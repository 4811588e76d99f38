import EventProtocol

/// The application an ``EventServer`` serves: how to snapshot its state for a user, and how a command
/// from a user changes it and which users hear about it.
///
/// The application is a value held inside the server's state machine, so a command's state change and the
/// pushing of its events to every accepting queue happen in one synchronous step: no registration can see
/// one without the other.
///
/// ```swift
/// struct Counter: ServerApplication {
///   var value = 0
///   func snapshot(for user: UserID) -> Int { value }
///   mutating func handle(_ command: Int, from user: UserID) throws(CommandRejection) -> [Delivery<Tick>] {
///     value += command
///     return [Delivery(to: ["alice", "bob"], event: Tick(value: value))]
///   }
/// }
/// ```
public protocol ServerApplication: Sendable {
  /// What a registration returns: the application's state as one user sees it.
  associatedtype Snapshot: Codable & Sendable & Equatable
  /// The events the application pushes to queues.
  associatedtype Event: EventPayload
  /// What users ask the application to do; it crosses the wire, and the server digests it to tell a
  /// repeated write from a different one.
  associatedtype Command: Codable & Sendable
  /// The items a fetch answers with, for state clients hold only in part; ``NoFetchedItem`` when the
  /// application answers no fetch.
  associatedtype FetchedItem: Codable & Sendable & Equatable = NoFetchedItem

  /// The state of the application as `user` sees it now.
  func snapshot(for user: UserID) -> Snapshot

  /// Applies `command` from `user`, returning the events to push and who receives each.
  /// - Throws: ``CommandRejection`` when the command is refused; the application must then be unchanged.
  mutating func handle(_ command: Command, from user: UserID) throws(CommandRejection) -> [Delivery<Event>]

  /// Called when the last queue of `user` is removed (expired, deleted, dropped for overflow).
  mutating func lastQueueRemoved(for user: UserID)

  /// Applies a command at the server's time `now` (an application with rules in time, such as scheduled
  /// publishing or clamped client timestamps, implements this one). By default, ``handle(_:from:)``.
  mutating func handle(
    _ command: Command,
    from user: UserID,
    at now: Timestamp
  ) throws(CommandRejection)
    -> [Delivery<Event>]

  /// The earliest server time at which the application has work of its own, with no command to prompt it
  /// (a scheduled episode to publish, a video to expire); `nil` when it has none. By default, `nil`.
  ///
  /// The server reads it after every input, so it must be cheap (keep an index, not a scan). When the
  /// server's clock reaches it, the server calls ``deadlineReached(at:)`` in the same step as it pushes the
  /// returned events, and records the call in its input log so a recovered server replays it.
  var nextDeadline: Timestamp? { get }

  /// The server's clock reached ``nextDeadline``: does what came due by `now` and returns the events to
  /// push. It must depend only on the application's state and `now` (the server replays it after a crash),
  /// and must move ``nextDeadline`` past `now`. By default, nothing.
  mutating func deadlineReached(at now: Timestamp) -> [Delivery<Event>]

  /// One page of a narrow as `user` sees it now (`FetchPage/select(_:request:position:)` answers the anchor
  /// and the counts). The server reads it in the same synchronous step as the caller's queue's last event
  /// id, so the page is atomic with the queue, exactly like a registration's snapshot: every event about
  /// these items up to that id is reflected in it, none after. By default no narrow can be fetched.
  /// - Throws: ``CommandRejection`` for a narrow the application does not know (answered `BAD_REQUEST`).
  func fetch(_ request: FetchRequest, for user: UserID) throws(CommandRejection) -> FetchPage<FetchedItem>
}

extension ServerApplication {
  public mutating func lastQueueRemoved(for user: UserID) {}

  public var nextDeadline: Timestamp? { nil }

  public mutating func deadlineReached(at now: Timestamp) -> [Delivery<Event>] { [] }

  public func fetch(_ request: FetchRequest, for user: UserID) throws(CommandRejection) -> FetchPage<FetchedItem> {
    throw CommandRejection("this application answers no fetch")
  }

  public mutating func handle(
    _ command: Command,
    from user: UserID,
    at now: Timestamp
  ) throws(CommandRejection)
    -> [Delivery<Event>]
  {
    try handle(command, from: user)
  }
}

/// An event and the users whose accepting queues receive it.
///
/// An application that sends to the same long list again and again (a channel's members, everyone) should
/// keep the array and pass it as it is: the server resolves a list of 32 users or more to their queues once
/// and reuses that while the array is unchanged and no queue comes or goes, instead of looking every
/// recipient up for every event (about 1.7× the deliveries per second at 1,000 recipients: `Bench W1`'s
/// broadcast to a kept list against one built per event; docs/decisions/0002-each-event-stored-once.md).
///
/// ```swift
/// struct Channel { var members: [UserID] }   // kept, changed only when membership changes
/// func announce(_ event: NoteEvent, in channel: Channel) -> Delivery<NoteEvent> {
///   Delivery(to: channel.members, event: event)
/// }
/// ```
public struct Delivery<Event: EventPayload>: Sendable, Equatable {
  /// The users to notify, in order; each of their queues that accepts the event's type gets it. A user
  /// named twice is notified once.
  public var recipients: [UserID]
  /// The event.
  public var event: Event

  /// Creates a Delivery from its parts.
  public init(to recipients: [UserID], event: Event) {
    self.recipients = recipients
    self.event = event
  }
}

/// Why an application refused a command. Answered on the wire as `BAD_REQUEST`.
public struct CommandRejection: Error, Hashable, Sendable, CustomStringConvertible {
  /// A human-readable reason.
  public var reason: String

  /// Creates a CommandRejection from its parts.
  public init(_ reason: String) {
    self.reason = reason
  }

  public var description: String { "command rejected: \(reason)" }
}

/// The fetched item of an application that answers no fetch.
public struct NoFetchedItem: Codable, Sendable, Equatable {}
