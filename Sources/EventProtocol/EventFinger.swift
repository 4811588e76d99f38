/// A place held in a server's event stream: a queue and the last event id the holder has applied.
///
/// Like a finger holding a place in a book: with it, a poll asks for exactly the events after that place.
/// A registration's snapshot is atomic with its finger, so snapshot + every event after the finger is the
/// server's current state.
public struct EventFinger: Hashable, Codable, Sendable, CustomStringConvertible {
  /// The queue the events come from.
  public var queueID: QueueID
  /// The id of the last event applied; `-1` before the first.
  public var lastEventID: Int

  /// Creates a EventFinger from its parts.
  public init(queueID: QueueID, lastEventID: Int) {
    self.queueID = queueID
    self.lastEventID = lastEventID
  }

  public var description: String { "\(queueID)@\(lastEventID)" }
}
