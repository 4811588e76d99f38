import EventProtocol
import Foundation

/// The durable storage of a server in a deterministic world (``EventServerStateMachine`` driven directly,
/// with no actor and no threads): what a crash keeps and what it loses, through the real record codec and
/// snapshots.
///
/// The world's server machine records its inputs; after each input the world calls ``collect(from:)``,
/// which takes them as pending (written, not yet durable) and returns the position the input's effects need.
/// An answer may leave the server only once ``durablePosition`` reaches that position: the world calls
/// ``flush()`` before delivering it, as a group commit would. `crashed(configuration:random:now:)`
/// rebuilds the server from what is durable, losing every pending record, exactly as a restart after a
/// SIGKILL does.
///
/// ```swift
/// var storage = SimulatedServerStorage<NoteBoard>()
/// server.startRecording()
/// let (receipt, actions) = try server.applyMutation(request, from: "alice", now: now)
/// let needed = storage.collect(from: &server)
/// storage.flush()                    // before the receipt leaves the server
/// server = try storage.crashed(configuration: server.configuration, random: rng, now: now)
/// ```
public struct SimulatedServerStorage<Application: ServerApplication & Codable>: Sendable {
  /// The durable snapshot, kept as a value; encoded (and decoded) only when a crash rebuilds from it.
  private var snapshot: ServerSnapshot<Application>?
  /// The durable records after the snapshot, kept as values; framed through ``ServerLogCodec`` only when a
  /// crash rebuilds from them, so a world pays for the codec per crash, not per input.
  private var records: [ServerLogEntry<Application.Command>] = []
  private var pending: [ServerLogEntry<Application.Command>] = []
  /// The last position known durable.
  public private(set) var durablePosition: UInt64 = 0
  /// How many crashes rebuilt the server from this storage.
  public private(set) var crashes = 0

  /// Empty storage (a server that has never run).
  public init() {}

  /// The last position given to a record, durable or not.
  public var appendedPosition: UInt64 { durablePosition + UInt64(pending.count) }

  /// How many durable records follow the snapshot.
  public var durableRecordCount: Int { records.count }

  /// What survives a crash, as a restarting server reads it: the snapshot and the framed records after it.
  /// - Throws: ``ServerLogError`` when an entry or the snapshot cannot be encoded (a bug of the application).
  public func durable() throws(ServerLogError) -> StoredLog {
    let base = snapshot?.position ?? 0
    var framed: [StoredRecord] = []
    framed.reserveCapacity(records.count)
    for (offset, entry) in records.enumerated() {
      framed.append(StoredRecord(position: base + UInt64(offset + 1), bytes: try ServerLogCodec.encode(entry)))
    }
    let stored = try snapshot.map { snapshot throws(ServerLogError) in
      StoredSnapshot(position: snapshot.position, bytes: try snapshot.encoded())
    }
    return StoredLog(snapshot: stored, records: framed)
  }

  /// Takes what `server` recorded since the last call as pending records.
  /// - Returns: The position the recorded inputs' effects need to be durable through.
  @discardableResult
  public mutating func collect(from server: inout EventServerStateMachine<Application>) -> UInt64 {
    pending += server.takeRecordedEntries()
    return appendedPosition
  }

  /// Makes every pending record durable (a group commit).
  public mutating func flush() {
    durablePosition += UInt64(pending.count)
    records += pending
    pending = []
  }

  /// Flushes, then stores a snapshot of `server` and drops the records it covers.
  public mutating func snapshot(of server: inout EventServerStateMachine<Application>) {
    collect(from: &server)
    flush()
    snapshot = server.snapshot(position: durablePosition)
    records = []
  }

  /// The server after a crash: pending records are lost; the server is rebuilt from the durable snapshot and
  /// records (through the record codec and the snapshot's encoding, as a real restart reads them), starts
  /// recording again and recovers (see ``EventServerStateMachine/recover(now:)``).
  /// - Parameters:
  ///   - application: The application when nothing durable holds one yet.
  ///   - configuration: Limits and timings.
  ///   - random: The new process's source of queue ids and heartbeat jitter.
  ///   - now: The time of the restart.
  /// - Returns: The rebuilt server (its recovery recorded and pending).
  /// - Throws: ``ServerLogError`` when the durable records cannot be replayed (a bug of the world).
  public mutating func crashed(
    application: @autoclosure () -> Application,
    configuration: EventServerConfiguration,
    random: some RandomNumberGenerator & Sendable,
    now: Timestamp
  ) throws(ServerLogError) -> EventServerStateMachine<Application> {
    pending = []
    crashes += 1
    var (server, _) = try EventServerStateMachine<Application>.rebuilding(
      from: try durable(),
      application: application(),
      configuration: configuration,
      random: random,
      now: now
    )
    server.startRecording()
    _ = server.recover(now: now)
    return server
  }
}
