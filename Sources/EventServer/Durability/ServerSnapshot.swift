import EventProtocol
import Foundation
import JSONCoding

/// The durable state of an ``EventServerStateMachine`` at one log position: the application, the queues,
/// the mutation memory and the push tokens. Parked polls, heartbeat deadlines and push timing are not part
/// of it: connections do not survive a restart.
///
/// A snapshot plus the log entries after its ``position`` is the server's whole durable form.
///
/// ```swift
/// let snapshot = machine.snapshot(position: 1_000)
/// var restored = try EventServerStateMachine(snapshot: snapshot, random: SystemRandomNumberGenerator())
/// ```
public struct ServerSnapshot<Application: ServerApplication & Codable>: Sendable, Codable {
  /// The format version this build writes and reads.
  public static var currentVersion: Int { 1 }

  /// The format version of this snapshot.
  public var version: Int
  /// The last log position the snapshot includes (0: none).
  public var position: UInt64
  /// The application's state.
  public var application: Application
  /// The queues (in id order), the mutation memory and the push tokens.
  public var queues: QueueDump<Application.Event>
  /// When the next sweep of expired queues is due.
  public var nextSweepAt: Timestamp

  /// Creates a snapshot from its parts.
  public init(
    position: UInt64,
    application: Application,
    queues: QueueDump<Application.Event>,
    nextSweepAt: Timestamp
  ) {
    self.version = Self.currentVersion
    self.position = position
    self.application = application
    self.queues = queues
    self.nextSweepAt = nextSweepAt
  }

  /// The snapshot's bytes (JSON).
  /// - Throws: ``ServerLogError/undecodable(_:)`` when the application cannot be encoded.
  public func encoded() throws(ServerLogError) -> Data {
    do {
      return ServerLogCodec.frame(try WireJSON.encodeData(self, sortedKeys: false))
    } catch {
      throw .undecodable("the snapshot cannot be encoded: \(error)")
    }
  }

  /// Reads a snapshot ``encoded()`` wrote: framed as a log record is (format, length, checksum), so a
  /// damaged one is refused rather than served. A snapshot of an earlier build (bare JSON, no checksum)
  /// is still read.
  /// - Throws: ``ServerLogError/damagedSnapshot(position:)`` when the checksum or length does not match;
  ///   `newerFormat` or `undecodable` as for records.
  public static func decode(_ data: Data, position: UInt64) throws(ServerLogError) -> ServerSnapshot {
    guard let first = data.first, first != UInt8(ascii: "{") else { return try decode(json: data) }
    guard first <= ServerLogCodec.currentVersion else {
      throw .newerFormat(found: Int(first), supported: Int(ServerLogCodec.currentVersion))
    }
    guard let payload = ServerLogCodec.checkedPayload(of: data) else { throw .damagedSnapshot(position: position) }
    return try decode(json: payload)
  }

  /// Reads a snapshot's JSON (without its frame).
  public static func decode(_ data: Data) throws(ServerLogError) -> ServerSnapshot {
    guard let first = data.first, first != UInt8(ascii: "{") else { return try decode(json: data) }
    return try decode(data, position: 0)
  }

  private static func decode(json data: Data) throws(ServerLogError) -> ServerSnapshot {
    guard let version = WireFormat.formatVersion(of: data) else { throw .undecodable("snapshot: no format version") }
    guard version <= currentVersion else { throw .newerFormat(found: version, supported: currentVersion) }
    do {
      let snapshot = try WireJSON.decode(ServerSnapshot.self, from: data)
      try snapshot.queues.validate()
      return snapshot
    } catch let error as QueueDumpError {
      throw .undecodable("snapshot: \(error)")
    } catch {
      throw .undecodable(SavedStateMismatch.describe(error, reading: "the snapshot"))
    }
  }
}

extension EventServerStateMachine where Application: Codable {
  /// The durable state now, labelled with the log `position` it includes.
  public func snapshot(position: UInt64) -> ServerSnapshot<Application> {
    ServerSnapshot(position: position, application: application, queues: dump(), nextSweepAt: nextSweepAt)
  }

  /// A server holding a snapshot's durable state: no parked polls, nothing recorded yet.
  /// - Parameters:
  ///   - snapshot: The state to hold.
  ///   - configuration: Limits and timings.
  ///   - random: The source of queue ids and heartbeat jitter.
  /// - Throws: ``ServerLogError/undecodable(_:)`` when the snapshot's queues break their invariants.
  public init(
    snapshot: ServerSnapshot<Application>,
    configuration: EventServerConfiguration = .init(),
    random: some RandomNumberGenerator & Sendable
  ) throws(ServerLogError) {
    do {
      try snapshot.queues.validate()
    } catch {
      throw .undecodable("snapshot: \(error)")
    }
    self.init(application: snapshot.application, configuration: configuration, random: random, now: .distantPast)
    mutationMemory = MutationMemory(records: snapshot.queues.mutations)
    pushRegistry = PushRegistry(records: snapshot.queues.pushes)
    for queue in snapshot.queues.queues { _ = table.insert(queue) }
    nextSweepAt = snapshot.nextSweepAt
  }
}
