import EventProtocol
import Foundation
import JSONCoding

extension PersistedRecord {
  /// Encodes the record as JSON.
  public func encoded() throws(PersistenceError) -> Data {
    do {
      return try WireJSON.encodeData(self, sortedKeys: false)
    } catch {
      throw .writeFailed("cannot encode the record: \(error)")
    }
  }

  /// Decodes a whole record strictly, checking its format version and ranges: for tests and tools. The
  /// engine uses ``restore(from:for:)``, which keeps what it can.
  /// - Throws: ``PersistenceError/newerVersion(found:supported:)`` for a newer format;
  ///   ``PersistenceError/corrupt(_:)`` for anything that is not a valid record.
  public static func decode(_ data: Data) throws(PersistenceError) -> PersistedRecord {
    try checkVersion(of: data)
    let record: PersistedRecord
    do {
      record = try WireJSON.decode(PersistedRecord.self, from: data)
    } catch {
      throw .corrupt("not a valid record: \(error)")
    }
    try RecordHeader(of: record).validate()
    if let problem = outboxProblem(record.outbox, record.rejected, nextMutationID: record.nextMutationID) {
      throw .corrupt(problem)
    }
    return record
  }

  /// What can be used of a stored record, part by part.
  public struct Restoration: Sendable {
    /// The record to start from; `nil` when nothing in the file is usable.
    public var record: PersistedRecord?
    /// Whether the file must be moved aside before it is overwritten (it holds writes not carried over).
    public var mustSetAside: Bool
    /// What was done, for the report.
    public var notes: [StoreRecovery]
  }

  /// Reads a stored record, keeping every part that still decodes.
  ///
  /// - An unreadable envelope (not JSON, no version, a newer version, bad ranges such as a next mutation
  ///   id near `UInt64.max` or a timestamp outside 2000–2200): nothing is used; set the file aside.
  /// - An outbox that no longer decodes: the rest is used with an empty outbox; set the file aside.
  /// - A state that no longer decodes, or was written under another state version: migrated by the
  ///   reducer if it can, else dropped (start stale, register); the outbox is kept.
  public static func restore<Reducer: UpdateReducer>(
    from data: Data,
    for reducer: Reducer
  ) -> Restoration where Reducer.State == State, Reducer.Mutation == Mutation {
    let header: RecordHeader
    let document: WireJSONDocument
    do {
      // Parsed once; each part below is decoded from the same parse and can fail alone.
      do {
        document = try WireJSONDocument(data)
      } catch {
        throw PersistenceError.corrupt("not JSON: \(error)")
      }
      try checkVersion(of: document)
      header = try RecordHeader.decode(document)
      try header.validate()
    } catch {
      return Restoration(record: nil, mustSetAside: true, notes: [setAsideNote(error, data)])
    }
    var notes: [StoreRecovery] = []
    var mustSetAside = false
    var outbox: [OutboxEntry<Mutation>] = []
    var rejected: [RejectedMutation<Mutation>] = []
    do {
      let part = try document.decode(OutboxPart.self)
      if let problem = outboxProblem(part.outbox, part.rejected, nextMutationID: header.nextMutationID) {
        throw PersistenceError.corrupt(problem)
      }
      (outbox, rejected) = (part.outbox, part.rejected)
    } catch {
      mustSetAside = true
      notes.append(setAsideNote(PersistenceError.corrupt("the outbox no longer decodes: \(error)"), data))
    }
    let deviceData = (try? document.decode(DevicePart.self))?.deviceData
    var record = PersistedRecord(
      clientID: header.clientID,
      stateVersion: reducer.stateVersion,
      state: reducer.initialState,
      finger: nil,
      lastContactAt: nil,
      dataAsOf: nil,
      queueLifetime: header.queueLifetime,
      longPollTimeout: header.longPollTimeout,
      outbox: outbox,
      rejected: rejected,
      nextMutationID: header.nextMutationID,
      deviceData: deviceData
    )
    let stored = header.stateVersion ?? 1
    do {
      let reading = StatePart.Reading(
        storedVersion: stored,
        currentVersion: reducer.stateVersion,
        migrate: { try reducer.migrateState(from: $0, storedVersion: $1) }
      )
      if let state = try document.decode(StatePart.self, userInfo: [StatePart.reducerKey: reading]).state {
        record.state = state
        record.finger = header.finger
        record.lastContactAt = header.lastContactAt
        record.dataAsOf = header.dataAsOf
        if stored != reducer.stateVersion { notes.append(.stateMigrated(fromVersion: stored)) }
      } else {
        notes.append(.stateDiscarded(reason: "no migration from state version \(stored) to \(reducer.stateVersion)"))
      }
    } catch {
      notes.append(.stateDiscarded(reason: "\(error)"))
    }
    return Restoration(record: record, mustSetAside: mustSetAside, notes: notes)
  }

  /// How many writes an unusable file's outbox holds, when that much can be read.
  public static func countWrites(in data: Data) -> Int? {
    try? WireJSON.decode(OutboxCounter.self, from: data).count
  }

  private static func setAsideNote(_ error: any Error, _ data: Data) -> StoreRecovery {
    let problem = (error as? PersistenceError) ?? .corrupt("\(error)")
    return .setAside(problem: problem, location: nil, strandedWrites: countWrites(in: data))
  }

  private static func checkVersion(of data: Data) throws(PersistenceError) {
    try checkVersion(version: WireFormat.formatVersion(of: data))
  }

  private static func checkVersion(of document: WireJSONDocument) throws(PersistenceError) {
    try checkVersion(version: (try? document.decode(FormatVersion.self))?.version)
  }

  /// The `version` field alone.
  private struct FormatVersion: Decodable {
    var version: Int
  }

  private static func checkVersion(version: Int?) throws(PersistenceError) {
    guard let version else {
      throw .corrupt("not a persisted record: no format version")
    }
    guard version <= currentVersion else { throw .newerVersion(found: version, supported: currentVersion) }
    guard version >= 1 else { throw .corrupt("unknown format version \(version)") }
  }

  static func outboxProblem(
    _ outbox: [OutboxEntry<Mutation>],
    _ rejected: [RejectedMutation<Mutation>],
    nextMutationID: MutationID
  ) -> String? {
    var seen: Set<MutationID> = []
    for entry in outbox {
      guard entry.id < nextMutationID, entry.id.rawValue > 0 else {
        return "outbox entry \(entry.id) is not below the next mutation id \(nextMutationID)"
      }
      guard seen.insert(entry.id).inserted else { return "outbox entry \(entry.id) appears twice" }
      guard entry.attempts >= 0 else { return "outbox entry \(entry.id) has \(entry.attempts) attempts" }
      guard RecordHeader.plausibleTimes.contains(entry.submittedAt) else {
        return "outbox entry \(entry.id) was submitted at an impossible time"
      }
    }
    return nil
  }

  /// The record's scalar parts, read apart from the state and the outbox so that each can fail alone.
  struct RecordHeader: Decodable {
    var clientID: ClientID
    var stateVersion: Int?
    var finger: EventFinger?
    var lastContactAt: Timestamp?
    var dataAsOf: Timestamp?
    var queueLifetime: Duration
    var longPollTimeout: Duration
    var nextMutationID: MutationID

    static var plausibleTimes: ClosedRange<Timestamp> { RecordLimits.plausibleTimes }
    static var maximumMutationID: MutationID { RecordLimits.maximumMutationID }

    init(of record: PersistedRecord) {
      clientID = record.clientID
      stateVersion = record.stateVersion
      finger = record.finger
      lastContactAt = record.lastContactAt
      dataAsOf = record.dataAsOf
      queueLifetime = record.queueLifetime
      longPollTimeout = record.longPollTimeout
      nextMutationID = record.nextMutationID
    }

    static func decode(_ document: WireJSONDocument) throws(PersistenceError) -> RecordHeader {
      do {
        return try document.decode(RecordHeader.self)
      } catch {
        throw .corrupt("not a valid record: \(error)")
      }
    }

    /// Refuses values no engine writes, which would otherwise trap or stall on every launch.
    func validate() throws(PersistenceError) {
      guard (1...ClientID.maximumLength).contains(clientID.rawValue.utf8.count) else {
        throw .corrupt("client id of \(clientID.rawValue.utf8.count) bytes")
      }
      guard nextMutationID.rawValue >= 1, nextMutationID <= Self.maximumMutationID else {
        throw .corrupt("next mutation id \(nextMutationID) out of range")
      }
      guard (.seconds(1) ... .seconds(366 * 24 * 3600)).contains(queueLifetime) else {
        throw .corrupt("queue lifetime \(queueLifetime) out of range")
      }
      guard (.seconds(1) ... .seconds(3600)).contains(longPollTimeout) else {
        throw .corrupt("long-poll timeout \(longPollTimeout) out of range")
      }
      for time in [lastContactAt, dataAsOf].compactMap({ $0 }) where !Self.plausibleTimes.contains(time) {
        throw .corrupt("timestamp \(time) out of range")
      }
      if let finger, finger.lastEventID < -1 || finger.lastEventID > 1 << 62 {
        throw .corrupt("finger \(finger) out of range")
      }
      if let stateVersion, stateVersion < 0 { throw .corrupt("state version \(stateVersion)") }
    }
  }

  private struct DevicePart: Decodable {
    var deviceData: Data?
  }

  private struct OutboxPart: Decodable {
    var outbox: [OutboxEntry<Mutation>]
    var rejected: [RejectedMutation<Mutation>]
  }

  /// The state, decoded as the reducer's current version or migrated from an older one.
  private struct StatePart: Decodable {
    struct Reading: Sendable {
      var storedVersion: Int
      var currentVersion: Int
      var migrate: @Sendable (any Decoder, Int) throws -> State?
    }

    static var reducerKey: CodingUserInfoKey { CodingUserInfoKey(rawValue: "UpdateMachine.stateReading")! }

    var state: State?

    private enum CodingKeys: String, CodingKey {
      case state
    }

    init(from decoder: any Decoder) throws {
      let reading = decoder.userInfo[Self.reducerKey] as! Reading
      let container = try decoder.container(keyedBy: CodingKeys.self)
      if reading.storedVersion == reading.currentVersion {
        state = try container.decode(State.self, forKey: .state)
      } else {
        state = try reading.migrate(try container.superDecoder(forKey: .state), reading.storedVersion)
      }
    }
  }

  private struct OutboxCounter: Decodable {
    var count: Int

    private enum CodingKeys: String, CodingKey {
      case outbox
    }

    init(from decoder: any Decoder) throws {
      let container = try decoder.container(keyedBy: CodingKeys.self)
      guard container.contains(.outbox) else {
        count = 0
        return
      }
      let entries = try container.nestedUnkeyedContainer(forKey: .outbox)
      guard let count = entries.count else { throw PersistenceError.corrupt("outbox of unknown length") }
      self.count = count
    }
  }
}

/// The ranges a persisted record's values must lie in.
private enum RecordLimits {
  /// Times a real record can hold: from 2000 to 2200.
  static let plausibleTimes = Timestamp(secondsSinceEpoch: 946_684_800)...Timestamp(secondsSinceEpoch: 7_258_118_400)
  /// The largest next mutation id a record may hold (2⁵³, exact in any JSON reader).
  static let maximumMutationID = MutationID(1 << 53)
}
