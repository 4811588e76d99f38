import EventServer
import Testing

@Suite("Lease confirmation: an answer confirms the leases for the bound from when it was asked")
struct LeaseConfirmationTests {
  let start = ContinuousClock.now

  @Test("nothing holds before the first answer or after a loss; late answers never move it back")
  func confirmation() {
    var confirmation = LeaseConfirmation<ContinuousClock.Instant>(bound: .seconds(4))
    #expect(!confirmation.holds(at: start))
    confirmation.answered(askedAt: start)
    #expect(confirmation.holds(at: start.advanced(by: .milliseconds(3_999))))
    #expect(!confirmation.holds(at: start.advanced(by: .seconds(4))), "the bound is counted from the asking")
    confirmation.answered(askedAt: start.advanced(by: .seconds(2)))
    let renewed = confirmation
    confirmation.answered(askedAt: start.advanced(by: .seconds(1)))
    #expect(confirmation == renewed, "an answer to an older request does not shorten the confirmation")
    #expect(confirmation.expiry == start.advanced(by: .seconds(6)))
    confirmation.lost()
    #expect(confirmation == LeaseConfirmation(bound: .seconds(4)))
    #expect(!confirmation.holds(at: start))
  }
}
