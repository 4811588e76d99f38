import EventProtocol
import Foundation
import Testing

@testable import EventHTTPServer

/// The form decoder every poll runs: what Foundation's `+`-then-`removingPercentEncoding` gives wherever the
/// escapes are whole and the bytes UTF-8; `nil` (a `400`) for the rest, where Foundation on Linux answered `nil`
/// for some texts and repaired others with U+FFFD.
@Suite("RequestFields decodes x-www-form-urlencoded as Foundation does")
struct RequestFieldsDecodeTests {
  private static let pieces = [
    "a", "Z", "0", "-", "_", ".", "~", "+", "%", "%2", "%2B", "%2b", "%20", "%25", "%41", "%C3", "%A9", "%c3%a9",
    "%E2%82%AC", "%FF", "%zz", "%0", "%00", "é", "€", " ", "queue_id", "1700000000:abc",
  ]

  @Test("random texts of escapes, pluses, partial escapes and non-ASCII decode as Foundation decodes them")
  func agreesWithFoundation() {
    var random = SeededRandomNumberGenerator(seed: 40)
    var decoded = 0
    for case_ in 0..<3_000 {
      let text = (0..<Int.random(in: 0...8, using: &random)).map { _ in Self.pieces.randomElement(using: &random)! }
        .joined()
      // The pieces hold no U+FFFD: one in Foundation's answer is a repair of bytes that are not UTF-8.
      let foundation = text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
      let expected = foundation?.unicodeScalars.contains("\u{FFFD}") == true ? nil : foundation
      #expect(RequestFields.decode(Substring(text)) == expected, "case \(case_): \(text)")
      if expected != nil { decoded += 1 }
    }
    // Both kinds came up often.
    #expect((500...2_500).contains(decoded))
  }

  @Test("a poll's query reads the same through the fast path and with escapes")
  func pollQuery() throws {
    let plain = try RequestFields(
      query: "queue_id=1700000000:abc&last_event_id=-1&dont_block=true",
      allowed: PollQuery.parameters
    )
    let escaped = try RequestFields(
      query: "queue_id=1700000000%3Aabc&last_event_id=%2D1&dont_block=tru%65",
      allowed: PollQuery.parameters
    )
    for name in ["queue_id", "last_event_id", "dont_block"] { #expect(plain.string(name) == escaped.string(name)) }
    #expect(plain.string("queue_id") == "1700000000:abc")
    #expect(!PollQuery.isLongPoll(query: "queue_id=q&last_event_id=-1&dont_block=1"))
    #expect(PollQuery.isLongPoll(query: "queue_id=q&last_event_id=-1&dont_block=false"))
    #expect(PollQuery.isLongPoll(query: "queue_id=q&last_event_id=-1"))
    #expect(!PollQuery.isLongPoll(query: "dont_block=TRUE&queue_id=q"))
    #expect(!PollQuery.isLongPoll(query: "queue_id=q&dont%5Fblock=true"))
    #expect(PollQuery.isLongPoll(query: "dont_block=0&dont_block=true"))
    #expect(PollQuery.isLongPoll(query: "dont_block"))
  }
}
