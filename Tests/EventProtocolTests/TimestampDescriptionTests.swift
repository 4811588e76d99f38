import EventProtocol
import Foundation
import Testing

@Suite("Timestamps print as UTC dates")
struct TimestampDescriptionTests {
  @Test("ISO 8601 with milliseconds, before and after the epoch, on leap days; far values as seconds")
  func examples() {
    #expect(Timestamp(secondsSinceEpoch: 1_700_000_000).description == "2023-11-14T22:13:20.000Z")
    #expect(Timestamp(secondsSinceEpoch: 0).description == "1970-01-01T00:00:00.000Z")
    #expect(Timestamp(sinceEpoch: .milliseconds(-1)).description == "1969-12-31T23:59:59.999Z")
    #expect(Timestamp(sinceEpoch: .milliseconds(1_709_164_800_042)).description == "2024-02-29T00:00:00.042Z")
    #expect(Timestamp.distantFuture.description.hasPrefix("t="))
    #expect(Timestamp.distantPast.description.hasPrefix("t="))
  }

  @Test(
    "agrees with Foundation's ISO 8601 formatter from 1583 to 9999 (before 1582 Foundation is Julian; ISO 8601 is not)"
  )
  func agreesWithFoundation() {
    var random = SeededRandomNumberGenerator(seed: 9)
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    for _ in 0..<2_000 {
      let seconds = Int64.random(in: -12_212_553_600...253_402_300_799, using: &random)
      let timestamp = Timestamp(secondsSinceEpoch: seconds)
      #expect(timestamp.description == formatter.string(from: timestamp.date), "\(seconds)")
    }
  }
}
