import Foundation

/// The group-commit bookkeeping of a durable ``EventServer``: which records wait to be written, which write
/// is under way, and how far the log is durable. A pure machine: the shell performs its ``Write``s one at a
/// time and reports back.
///
/// Records enqueued while a write is under way all go in the next write, so a burst of requests shares one
/// durable write (one sync) instead of paying one each. A snapshot is written after the records it includes.
///
/// ```swift
/// var commit = GroupCommit(durable: 0)
/// let (position, write) = commit.enqueue([bytes])   // 1, a write to perform
/// let next = commit.writeSucceeded()                 // durable is 1; nil: nothing more to write
/// ```
public struct GroupCommit: Sendable, Equatable {
  /// One durable write for the shell to perform.
  public struct Write: Sendable, Equatable {
    /// The records to append, in order (possibly none).
    public var records: [StoredRecord]
    /// A snapshot to store once the records are durable.
    public var snapshot: StoredSnapshot?
    /// The last position durable once this write succeeds.
    public var through: UInt64
  }

  /// The last position given to a record.
  public private(set) var appended: UInt64
  /// The last position given to a record that decided more than a poll's acknowledgement (every event a
  /// queue holds was queued by such a record, at or before this position).
  public private(set) var lastDecision: UInt64
  /// The last position known durable.
  public private(set) var durable: UInt64
  /// Why writing stopped, once a write failed: nothing is durable past ``durable`` and nothing more will be.
  public private(set) var failure: ServerLogError?
  private var pending: [StoredRecord] = []
  private var pendingSnapshot: StoredSnapshot?
  private var inFlight: Write?

  /// Bookkeeping for a log whose last durable position is `durable`.
  public init(durable: UInt64) {
    self.appended = durable
    self.durable = durable
    self.lastDecision = durable
  }

  /// Whether a write is under way.
  public var isWriting: Bool { inFlight != nil }

  /// Gives the next positions to framed records.
  /// - Parameters:
  ///   - frames: One input's records.
  ///   - acknowledgementsOnly: Whether the records only acknowledge polls (their effects are pruned events
  ///     and a contact time: a crash that loses them redelivers events the client skips by id).
  /// - Returns: The position the input's answers must wait for: the last position given (``appended``), or,
  ///   for acknowledgements only, ``lastDecision`` (what any answer can reveal was decided by then); and a
  ///   write to start when none is under way.
  public mutating func enqueue(_ frames: [Data], acknowledgementsOnly: Bool = false) -> (UInt64, Write?) {
    for frame in frames {
      appended += 1
      pending.append(StoredRecord(position: appended, bytes: frame))
    }
    if !acknowledgementsOnly { lastDecision = appended }
    return (lastDecision, startIfIdle())
  }

  /// Asks for a snapshot that includes everything enqueued so far (`bytes` must hold the state at
  /// ``appended``); it replaces one asked for earlier and not yet started.
  /// - Returns: A write to start when none is under way.
  public mutating func enqueueSnapshot(_ bytes: Data) -> Write? {
    pendingSnapshot = StoredSnapshot(position: appended, bytes: bytes)
    return startIfIdle()
  }

  /// The write under way succeeded.
  /// - Returns: The next write to start, if anything waits.
  public mutating func writeSucceeded() -> Write? {
    guard let write = inFlight else { preconditionFailure("writeSucceeded with no write under way") }
    durable = write.through
    inFlight = nil
    return startIfIdle()
  }

  /// A write failed (or a record could not be encoded): writing stops for good, and a restart recovers from
  /// what is durable.
  public mutating func fail(_ error: ServerLogError) {
    inFlight = nil
    if failure == nil { failure = error }
    pending = []
    pendingSnapshot = nil
  }

  /// A cluster node's turn ends: folds every record enqueued during the turn into one write (the write
  /// under way, or a new one) and returns it, for the shared log to append in the turn's transaction.
  /// Snapshots are not part of it (a node stores its snapshots after its turns).
  /// - Returns: `nil` when the turn decided nothing to record, or writing has stopped.
  public mutating func gatherWrite() -> Write? {
    guard failure == nil else { return nil }
    pendingSnapshot = nil
    guard var write = inFlight else { return startIfIdle() }
    write.records += pending
    write.through = write.records.last?.position ?? write.through
    pending = []
    inFlight = write
    return write
  }

  /// A stored application's input takes the writer (no write under way): records enqueued meanwhile wait,
  /// and the input's transaction writes them with its own (``gatherReserved()``).
  public mutating func reserve() {
    precondition(inFlight == nil && failure == nil, "reserve() while writing or after a failure")
    inFlight = Write(records: [], snapshot: nil, through: durable)
  }

  /// A stored input decided: folds every record enqueued since ``reserve()`` into the reserved write and
  /// returns them, for the input's transaction to append before it commits (then ``writeSucceeded()``). A
  /// snapshot asked for meanwhile waits for the next write.
  public mutating func gatherReserved() -> [StoredRecord] {
    guard var write = inFlight, failure == nil else { return [] }
    write.records += pending
    write.through = write.records.last?.position ?? write.through
    pending = []
    inFlight = write
    return write.records
  }

  /// Records through `position`, committed by other nodes of a shared log, were applied: they are durable,
  /// and this node's next records follow them. Only between turns (nothing pending, no write under way).
  public mutating func adopt(through position: UInt64) {
    precondition(inFlight == nil && pending.isEmpty, "adopt(through:) during a turn")
    appended = max(appended, position)
    durable = max(durable, position)
    lastDecision = max(lastDecision, position)
  }

  private mutating func startIfIdle() -> Write? {
    guard inFlight == nil, failure == nil, !pending.isEmpty || pendingSnapshot != nil else { return nil }
    let write = Write(records: pending, snapshot: pendingSnapshot, through: pending.last?.position ?? durable)
    pending = []
    pendingSnapshot = nil
    inFlight = write
    return write
  }
}
