import EventProtocol
import Testing

@testable import EventServer

@Suite("QueueRecord: times kept in 64-bit nanoseconds")
struct QueueRecordTests {
  @Test("times round-trip to the nanosecond; beyond ±292 years they saturate to the extremes")
  func compactTimes() {
    let exact = Timestamp(sinceEpoch: .seconds(1_764_000_000) + .nanoseconds(123_456_789))
    #expect(CompactTime.timestamp(CompactTime.nanoseconds(exact)) == exact)
    let finer = exact.advanced(by: Duration(attoseconds: 999_999_999))
    #expect(CompactTime.timestamp(CompactTime.nanoseconds(finer)) == exact)
    let before1970 = Timestamp(sinceEpoch: .seconds(-5))
    #expect(CompactTime.timestamp(CompactTime.nanoseconds(before1970)) == before1970)
    #expect(CompactTime.timestamp(CompactTime.nanoseconds(Timestamp.distantPast)) == .distantPast)
    #expect(CompactTime.timestamp(CompactTime.nanoseconds(Timestamp.distantFuture)) == .distantFuture)
    #expect(CompactTime.nanoseconds(Duration.seconds(Int64.max)) == .max)

    var record = QueueRecord(
      id: "q",
      user: "u",
      clientID: nil,
      eventTypes: nil,
      idleTimeout: .seconds(600),
      now: exact
    )
    #expect(record.idleTimeout == .seconds(600))
    #expect(!record.isExpired(at: exact.advanced(by: .seconds(600) - .nanoseconds(1))))
    #expect(record.isExpired(at: exact.advanced(by: .seconds(600))))
    record.lastContact = .distantPast
    #expect(record.lastContact == .distantPast)
    #expect(record.isExpired(at: exact))
  }
}
