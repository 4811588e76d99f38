import EventProtocol
import Testing

@testable import TokenAuthentication

/// When the verifying keys are fetched: fed arrivals and fetch ends on a clock the test owns.
@Suite("The key set is fetched on a pure schedule")
struct KeySetScheduleTests {
  private let t0 = Timestamp(secondsSinceEpoch: 1_800_000_000)
  private var policy: KeySetSchedule.Policy {
    var policy = KeySetSchedule.Policy()
    policy.refreshInterval = .seconds(300)
    policy.unknownKeyInterval = .seconds(30)
    policy.retryInterval = .seconds(5)
    return policy
  }

  private func at(_ seconds: Int) -> Timestamp { t0.advanced(by: .seconds(seconds)) }

  @Test("the first token fetches; tokens meanwhile wait for that fetch; then its keys are used")
  func firstFetch() {
    var schedule = KeySetSchedule(policy: policy)
    #expect(schedule.tokenArrived(keyKnown: false, now: at(0)) == .fetchThenAsk)
    #expect(schedule.isFetching)
    #expect(schedule.tokenArrived(keyKnown: false, now: at(0)) == .fetchThenAsk)
    schedule.fetchEnded(succeeded: true, now: at(1))
    #expect(!schedule.isFetching)
    #expect(schedule.askedAgain(keyKnown: true) == .verify)
    #expect(schedule.askedAgain(keyKnown: false) == .refuseUnknownKey)
    #expect(schedule.tokenArrived(keyKnown: true, now: at(2)) == .verify)
  }

  @Test("an unknown key fetches again at most once per 30 s, and a known one never waits for that fetch")
  func unknownKeys() {
    var schedule = KeySetSchedule(policy: policy)
    _ = schedule.tokenArrived(keyKnown: false, now: at(0))
    schedule.fetchEnded(succeeded: true, now: at(0))
    #expect(schedule.tokenArrived(keyKnown: false, now: at(29)) == .refuseUnknownKey)
    #expect(schedule.tokenArrived(keyKnown: false, now: at(30)) == .fetchThenAsk)
    #expect(schedule.tokenArrived(keyKnown: true, now: at(30)) == .verify)
    schedule.fetchEnded(succeeded: true, now: at(31))
    #expect(schedule.tokenArrived(keyKnown: false, now: at(59)) == .refuseUnknownKey)
    #expect(schedule.tokenArrived(keyKnown: false, now: at(60)) == .fetchThenAsk)
  }

  @Test("a set older than 5 minutes is refreshed in the background once; a failed refresh keeps it in use")
  func refresh() {
    var schedule = KeySetSchedule(policy: policy)
    _ = schedule.tokenArrived(keyKnown: false, now: at(0))
    schedule.fetchEnded(succeeded: true, now: at(0))
    #expect(schedule.tokenArrived(keyKnown: true, now: at(299)) == .verify)
    #expect(schedule.tokenArrived(keyKnown: true, now: at(300)) == .verifyAndRefresh)
    #expect(schedule.tokenArrived(keyKnown: true, now: at(300)) == .verify)
    schedule.fetchEnded(succeeded: false, now: at(301))
    #expect(schedule.askedAgain(keyKnown: true) == .verify)
    #expect(schedule.tokenArrived(keyKnown: true, now: at(304)) == .verify)
    #expect(schedule.tokenArrived(keyKnown: true, now: at(305)) == .verifyAndRefresh)
    schedule.fetchEnded(succeeded: true, now: at(306))
    #expect(schedule.tokenArrived(keyKnown: true, now: at(605)) == .verify)
    #expect(schedule.tokenArrived(keyKnown: true, now: at(606)) == .verifyAndRefresh)
  }

  @Test("with no keys ever loaded, a failed fetch answers unavailable for 5 s, then fetches again")
  func neverLoaded() {
    var schedule = KeySetSchedule(policy: policy)
    _ = schedule.tokenArrived(keyKnown: false, now: at(0))
    schedule.fetchEnded(succeeded: false, now: at(1))
    #expect(schedule.askedAgain(keyKnown: false) == .unavailable)
    #expect(schedule.tokenArrived(keyKnown: false, now: at(5)) == .unavailable)
    #expect(schedule.tokenArrived(keyKnown: false, now: at(6)) == .fetchThenAsk)
    schedule.fetchEnded(succeeded: true, now: at(6))
    #expect(schedule.askedAgain(keyKnown: true) == .verify)
  }

  @Test("two schedules fed the same inputs are equal: the machine holds nothing but its state")
  func deterministic() {
    var first = KeySetSchedule(policy: policy)
    var second = KeySetSchedule(policy: policy)
    _ = first.tokenArrived(keyKnown: false, now: at(0))
    _ = second.tokenArrived(keyKnown: false, now: at(0))
    first.fetchEnded(succeeded: true, now: at(2))
    #expect(first != second)
    second.fetchEnded(succeeded: true, now: at(2))
    #expect(first == second)
  }
}
