import EventProtocol

/// One queue's acknowledgement as the input log keeps it: where its client's polls acknowledged up to, and
/// when the last of them came (the queue's contact time). Recorded lazily, in batches
/// (``ServerInput/acknowledgements(_:)``): a poll itself writes nothing.
public struct QueueAcknowledgement: Sendable, Hashable, Codable {
  /// The queue.
  public var queueID: QueueID
  /// The highest event id acknowledged; `nil` when only the contact time changed (a parked poll's caller
  /// went away before acknowledging anything new).
  public var lastEventID: Int?
  /// When the latest poll came.
  public var contact: Timestamp

  /// An acknowledgement from its parts.
  public init(queueID: QueueID, lastEventID: Int?, contact: Timestamp) {
    self.queueID = queueID
    self.lastEventID = lastEventID
    self.contact = contact
  }
}

/// The acknowledgements polls made that the input log does not hold yet, one per queue (the latest wins).
///
/// They are recorded as one ``ServerInput/acknowledgements(_:)`` entry **before the next recorded input of
/// any kind** (so replay prunes each queue exactly where the live server had pruned it when that input came:
/// an overflow or anything else that depends on a queue's length is recomputed the same), when
/// ``EventServerConfiguration/acknowledgementFlushInterval`` has passed since the first of them, and at
/// shutdown. Losing them in a crash only redelivers events the client already has and skips by id; a
/// recovery restarts every queue's idle time, so no queue expires for a contact that was not written.
struct UnrecordedAcknowledgements: Sendable {
  private var latest: [QueueID: QueueAcknowledgement] = [:]
  /// When they must be recorded at the latest (the first one's time plus the flush interval).
  private(set) var dueAt: Timestamp?

  var isEmpty: Bool { latest.isEmpty }

  /// Notes a poll on `queueID` at `now` acknowledging through `lastEventID`.
  mutating func note(_ queueID: QueueID, lastEventID: Int?, at now: Timestamp, interval: Duration) {
    let earlier = latest[queueID]?.lastEventID
    let highest = [earlier, lastEventID].compactMap { $0 }.max()
    latest[queueID] = QueueAcknowledgement(queueID: queueID, lastEventID: highest, contact: now)
    if dueAt == nil { dueAt = now.advanced(by: interval) }
  }

  /// Hands them out in queue-id order (a deterministic record) and forgets them.
  mutating func take() -> [QueueAcknowledgement] {
    defer {
      latest = [:]
      dueAt = nil
    }
    return latest.values.sorted { $0.queueID < $1.queueID }
  }
}
