import EventProtocol
import EventServer
import UpdateMachine

extension ConvergenceCheck {
  /// Zulip's test for an application whose clients hold state in part: at every cut, a client registers
  /// (the snapshot) and fetches every narrow in `narrows(user)` whole (pages read at the cut), then applies
  /// every later event. At the end its whole part must equal the final snapshot's, and everything its
  /// partial part claims (known items, intervals of completeness) must be true of the final application
  /// (``PartialStateCheck``). Unknown items are not compared: nothing is claimed of them.
  /// - Parameters:
  ///   - application: The server application in its starting state.
  ///   - reducer: The client reducer.
  ///   - users: The users whose views are checked.
  ///   - narrows: The narrows each user's client holds.
  ///   - commands: Who sends what, in order.
  /// - Returns: The first disagreement, or `nil` when every view converges.
  public static func checkPartial<Application: ServerApplication, Reducer: PartialUpdateReducer>(
    application: Application,
    reducer: Reducer,
    users: [UserID],
    narrows: (UserID) -> [Narrow],
    commands: [(UserID, Application.Command)]
  ) -> Failure?
  where
    Reducer.State == Application.Snapshot, Reducer.Event == Application.Event,
    Application.FetchedItem == Reducer.Item
  {
    var application = application
    // Per cut: each user's client right after registering and fetching its narrows.
    var starts: [[UserID: Reducer.State]] = []
    var received: [[UserID: [Application.Event]]] = []
    func clients() -> [UserID: Reducer.State] {
      var states: [UserID: Reducer.State] = [:]
      for user in users {
        var state = application.snapshot(for: user)
        for narrow in narrows(user) {
          let request = FetchRequest(narrow: narrow, anchor: .oldest, before: 0, after: FetchRequest.maximumPageSize)
          guard let page = try? application.fetch(request, for: user) else { continue }
          state[keyPath: reducer.partialState].merge(
            FetchAnswer(queueID: "check", lastEventID: 0, request: request, page: page)
          )
        }
        states[user] = state
      }
      return states
    }
    starts.append(clients())
    for (sender, command) in commands {
      var events: [UserID: [Application.Event]] = [:]
      if let deliveries = try? application.handle(command, from: sender) {
        for delivery in deliveries {
          for recipient in Set(delivery.recipients) { events[recipient, default: []].append(delivery.event) }
        }
      }
      received.append(events)
      starts.append(clients())
    }
    for user in users {
      var final = application.snapshot(for: user)
      final[keyPath: reducer.partialState] = PartialState()
      for cut in starts.indices {
        var state = starts[cut][user]!
        if let failure = replay(received, from: cut, for: user, onto: &state, with: reducer) { return failure }
        let partial = state[keyPath: reducer.partialState]
        state[keyPath: reducer.partialState] = PartialState()
        if state != final {
          return Failure(user: user, cut: cut, reason: "whole part \(state), but the final snapshot's is \(final)")
        }
        let problems = PartialStateCheck.problems(in: partial) { request in
          try? application.fetch(request, for: user)
        }
        if let problem = problems.first {
          return Failure(user: user, cut: cut, reason: problem)
        }
      }
    }
    return nil
  }
}
