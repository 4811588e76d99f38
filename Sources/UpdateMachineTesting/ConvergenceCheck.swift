import EventProtocol
import EventServer
import UpdateMachine

/// Zulip's own test of an events system, for any application and reducer: for every user and every cut
/// point in a sequence of commands, applying the events that user received after the cut to the snapshot
/// taken at the cut must give the snapshot at the end.
///
/// If it holds, a client that registered at any moment and applied every later event shows exactly what a
/// fresh registration would: the snapshot and the events agree. Run it over many random command sequences
/// (refused commands included):
///
/// ```swift
/// @Test(arguments: 0..<500 as Range<UInt64>)
/// func eventsAgreeWithSnapshots(seed: UInt64) {
///   let commands = randomCommands(seed: seed)
///   #expect(ConvergenceCheck.check(application: VideoServer(), reducer: VideoReducer(),
///                                  users: ["alice", "bob"], commands: commands) == nil)
/// }
/// ```
public enum ConvergenceCheck {
  /// Where the check failed.
  public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The user whose view disagreed.
    public var user: UserID
    /// The number of commands applied before the cut.
    public var cut: Int
    /// What went wrong.
    public var reason: String

    public var description: String { "user \(user), cut after \(cut) commands: \(reason)" }
  }

  /// Runs the commands on a copy of `application` and checks every user at every cut.
  /// - Parameters:
  ///   - application: The server application in its starting state.
  ///   - reducer: The client reducer.
  ///   - users: The users whose views are checked.
  ///   - commands: Who sends what, in order; refused commands must leave the application unchanged and
  ///     deliver nothing.
  /// - Returns: The first disagreement, or `nil` when every view converges.
  /// - Complexity: O(*u* × *n*²) reducer calls for *u* users and *n* commands.
  public static func check<Application: ServerApplication, Reducer: UpdateReducer>(
    application: Application,
    reducer: Reducer,
    users: [UserID],
    commands: [(UserID, Application.Command)]
  ) -> Failure?
  where Reducer.State == Application.Snapshot, Reducer.Event == Application.Event {
    var application = application
    var snapshots: [[UserID: Application.Snapshot]] = [snapshotsOf(application, users)]
    var received: [[UserID: [Application.Event]]] = []
    for (sender, command) in commands {
      var events: [UserID: [Application.Event]] = [:]
      let before = snapshots.last!
      do {
        for delivery in try application.handle(command, from: sender) {
          for recipient in Set(delivery.recipients) { events[recipient, default: []].append(delivery.event) }
        }
      } catch {
        let after = snapshotsOf(application, users)
        if let user = users.first(where: { after[$0] != before[$0] }) {
          return Failure(user: user, cut: received.count, reason: "a refused command changed the snapshot")
        }
      }
      received.append(events)
      snapshots.append(snapshotsOf(application, users))
    }
    let final = snapshots.last!
    for user in users {
      for cut in snapshots.indices {
        var state = snapshots[cut][user]!
        if let failure = replay(received, from: cut, for: user, onto: &state, with: reducer) { return failure }
        if state != final[user]! {
          return Failure(
            user: user,
            cut: cut,
            reason: "events after the cut give \(state), but the final snapshot is \(final[user]!)"
          )
        }
      }
    }
    return nil
  }

  /// Applies the events `user` received from step `cut` on to `state`, as the engine does.
  /// - Returns: The failure when the reducer refuses one.
  static func replay<Reducer: UpdateReducer>(
    _ received: [[UserID: [Reducer.Event]]],
    from cut: Int,
    for user: UserID,
    onto state: inout Reducer.State,
    with reducer: Reducer
  ) -> Failure? {
    for step in cut..<received.count {
      for event in received[step][user] ?? [] {
        do {
          try reducer.reduce(event, into: &state)
        } catch {
          return Failure(user: user, cut: cut, reason: "the reducer refused an event the server sent: \(error)")
        }
      }
    }
    return nil
  }

  private static func snapshotsOf<Application: ServerApplication>(
    _ application: Application,
    _ users: [UserID]
  ) -> [UserID: Application.Snapshot] {
    Dictionary(uniqueKeysWithValues: users.map { ($0, application.snapshot(for: $0)) })
  }
}
