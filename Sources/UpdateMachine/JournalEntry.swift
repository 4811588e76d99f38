import EventProtocol
import Foundation
import JSONCoding

/// One journal entry: the events applied since the previous save, and the rest of the record as it stood
/// after them (finger, timestamps, outbox, device data) with an empty state.
struct JournalEntry<Event: EventPayload, Mutation: Codable & Sendable & Equatable>: Codable {
  /// The record's state in an entry: absent, since the events carry the change.
  struct NoState: Codable, Sendable, Equatable {}

  var record: PersistedRecord<NoState, Mutation>
  /// The events in their wire form (which carries each one's type), with the ids and origins they came with
  /// (an event decoded from a poll's answer copied as it arrived); replay reads neither.
  var events: [EventEnvelope<Event>]

  /// An entry of `events` after `record`. Each envelope keeps its body and the bytes it was kept with: the
  /// members the server's size check encoded (in process) or the envelope object as it arrived in a poll's
  /// answer (through JSON), which the package's coder copies instead of encoding the payload again. The
  /// envelopes are the batch's own array, shared: nothing is copied or changed per event.
  init<State>(_ record: PersistedRecord<State, Mutation>, events: AppliedEvents<Event>) {
    self.record = PersistedRecord(
      clientID: record.clientID,
      stateVersion: record.stateVersion,
      state: NoState(),
      finger: record.finger,
      lastContactAt: record.lastContactAt,
      dataAsOf: record.dataAsOf,
      queueLifetime: record.queueLifetime,
      longPollTimeout: record.longPollTimeout,
      outbox: record.outbox,
      rejected: record.rejected,
      nextMutationID: record.nextMutationID,
      deviceData: record.deviceData
    )
    self.events = events.envelopes
  }

  private enum CodingKeys: String, CodingKey {
    case record
    case events
  }

  /// Writes the members the synthesised conformance would, in its order; the package's coder writes the
  /// events as one batch (``JSONValueEncoder/encodeEnvelopes(_:member:serial:)``: how payloads are written
  /// decided once, kept members copied).
  func encode(to encoder: any Encoder) throws {
    if let json = encoder as? JSONValueEncoder {
      let serial = json.output.beginObject(at: json.depth)
      try json.output.beginMember(CodingKeys.record.stringValue, at: json.depth, serial: serial)
      try json.output.encodeValue(record, key: CodingKeys.record)
      try json.encodeEnvelopes(events, member: CodingKeys.events, serial: serial, copyingArrived: true)
      return
    }
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(record, forKey: .record)
    try container.encode(events, forKey: .events)
  }

  func encoded() throws(PersistenceError) -> Data {
    do {
      return try WireJSON.encodeData(self, sortedKeys: false)
    } catch {
      throw .writeFailed("cannot encode a journal entry: \(error)")
    }
  }

  /// `record` with `entries` replayed onto it, in order, through `reducer`. Replay stops at the first entry
  /// that does not decode, fails its checks or whose events the reducer refuses: the record is then the one
  /// after the entry before, whole and consistent (an older finger; the server answers it or the machine
  /// registers again).
  /// - Returns: The record, and how many entries were replayed.
  static func replay<Reducer: UpdateReducer>(
    _ entries: [Data],
    onto record: PersistedRecord<Reducer.State, Mutation>,
    with reducer: Reducer
  ) -> (record: PersistedRecord<Reducer.State, Mutation>, replayed: Int)
  where Reducer.Event == Event, Reducer.Mutation == Mutation {
    var record = record
    var replayed = 0
    for data in entries {
      guard let entry = try? WireJSON.decode(JournalEntry.self, from: data),
        (try? PersistedRecord<NoState, Mutation>.RecordHeader(of: entry.record).validate()) != nil
      else { break }
      var state = record.state
      do {
        for event in entry.events {
          // An event this build cannot read stops the replay: applying the rest would skip it.
          guard case .payload(let payload) = event.body else { throw ReducerError("unreadable journaled event") }
          try reducer.reduce(payload, into: &state)
        }
      } catch {
        break
      }
      let header = entry.record
      record = PersistedRecord(
        clientID: header.clientID,
        stateVersion: record.stateVersion,
        state: state,
        finger: header.finger,
        lastContactAt: header.lastContactAt,
        dataAsOf: header.dataAsOf,
        queueLifetime: header.queueLifetime,
        longPollTimeout: header.longPollTimeout,
        outbox: header.outbox,
        rejected: header.rejected,
        nextMutationID: header.nextMutationID,
        deviceData: header.deviceData
      )
      replayed += 1
    }
    return (record, replayed)
  }
}
