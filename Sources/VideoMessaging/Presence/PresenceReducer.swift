import EventProtocol
import UpdateMachine

/// The presence machine's reducer: keeps who is recording to the user.
public struct PresenceReducer: UpdateReducer {
  /// Creates the reducer.
  public init() {}

  public var initialState: PresenceSnapshot { PresenceSnapshot() }

  public func apply(_ event: PresenceEvent, to state: inout PresenceSnapshot) throws(ReducerError) {
    switch event {
    case .recording(let change):
      state.recordingToMe.removeAll { $0 == change.sender }
      if change.active {
        state.recordingToMe.append(change.sender)
        state.recordingToMe.sort()
      }
    }
  }

  /// Presence writes show nothing locally: the sender knows it is recording.
  public func applyOptimistically(_ mutation: PresenceCommand, to state: inout PresenceSnapshot) {}

  /// A newer announcement to the same recipient makes an unsent older one pointless.
  public func replaces(_ mutation: PresenceCommand, unsent older: PresenceCommand) -> Bool {
    switch (mutation, older) {
    case (.recording(let new), .recording(let old)), (.stopped(let new), .recording(let old)),
      (.recording(let new), .stopped(let old)), (.stopped(let new), .stopped(let old)):
      new == old
    }
  }

  /// The configuration of an ephemeral machine: a queue that lives two minutes (a lost one costs a
  /// registration of a few bytes), no background polls (who is recording matters only on screen). Keep its
  /// state in an `InMemoryStore`: nothing survives the app.
  public static var configuration: UpdateMachineConfiguration {
    var configuration = UpdateMachineConfiguration()
    configuration.queueLifespan = .seconds(120)
    configuration.backgroundPollInterval = nil
    return configuration
  }
}
