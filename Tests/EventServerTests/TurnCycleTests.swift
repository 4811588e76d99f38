import EventProtocol
import TestScheduling
import Testing

@testable import EventServer

@Suite("A cluster node's turn cycle, as a machine: one turn at a time, late outcomes ignored, rejoin and fail-fast")
struct TurnCycleTests {
  let now = Timestamp(secondsSinceEpoch: 1_700_000_000)
  let unreachable = ServerLogError.storage("the database did not answer")

  /// A cycle whose turns 1 … `count` each started and committed.
  func committed(turns count: Int) -> TurnCycle {
    var cycle = TurnCycle()
    for number in 1...count {
      #expect(cycle.inputsWaiting() == .startTurn(number: number))
      cycle.turnDecided(number)
      #expect(cycle.turnCommitted(number) == .answer)
    }
    return cycle
  }

  @Test("a turn starts only between turns and only for work; inputs arriving meanwhile wait for the next")
  func oneTurnAtATime() {
    var cycle = TurnCycle()
    #expect(cycle.inputsWaiting(false) == .none, "nothing waits: no turn")
    #expect(cycle == TurnCycle())
    #expect(cycle.inputsWaiting() == .startTurn(number: 1))
    let underWay = cycle
    #expect(cycle.inputsWaiting() == .none, "a turn is under way: the input waits")
    #expect(cycle == underWay)
    #expect(cycle.isTurnUnderWay && cycle.isActive(1) && !cycle.isActive(2))
    cycle.turnDecided(1)
    #expect(cycle.turnCommitted(1) == .answer)
    #expect(!cycle.isTurnUnderWay)
    #expect(cycle.inputsWaiting() == .startTurn(number: 2), "the waiting input starts the next turn")
    #expect(cycle.turnsStarted == 2)
  }

  @Test("the inbox starts a turn with no input waiting; announced during a turn, it starts the next one")
  func inboxDemand() {
    var cycle = TurnCycle()
    #expect(cycle.inboxAnnounced() == .startTurn(number: 1))
    #expect(cycle.inboxAnnounced() == .none)
    cycle.turnDecided(1)
    #expect(cycle.turnCommitted(1) == .answer)
    #expect(cycle.inputsWaiting(false) == .startTurn(number: 2), "the inbox announced during turn 1 is still owed")
    cycle.turnDecided(2)
    #expect(cycle.turnCommitted(2) == .answer)
    #expect(cycle.inputsWaiting(false) == .none, "turn 2 took the inbox")
    #expect(cycle == committed(turns: 2))
  }

  @Test("a turn given up reaches its end late: its commit and its failure change nothing")
  func lateOutcomeIgnored() {
    var cycle = TurnCycle()
    _ = cycle.inputsWaiting()
    #expect(
      cycle.turnFailed(1, with: unreachable, logStopped: false, now: now, refuseFor: .seconds(1))
        == .failWaitingAndRefuseUntil(now.advanced(by: .seconds(1)))
    )
    #expect(cycle.refusal(now: now.advanced(by: .seconds(2))) == nil)
    #expect(cycle.inputsWaiting() == .startTurn(number: 2))
    let before = cycle
    #expect(cycle.turnCommitted(1) == .ignore)
    #expect(cycle.turnFailed(1, with: unreachable, logStopped: false, now: now, refuseFor: .seconds(1)) == .ignore)
    #expect(cycle == before)
    #expect(cycle.isActive(2))
  }

  @Test("a turn that fails before deciding refuses requests for a moment, then is forgotten")
  func failFastAfterUndecidedFailure() {
    var cycle = committed(turns: 1)
    #expect(cycle.inputsWaiting() == .startTurn(number: 2))
    let until = now.advanced(by: .milliseconds(500))
    #expect(
      cycle.turnFailed(2, with: unreachable, logStopped: false, now: now, refuseFor: .milliseconds(500))
        == .failWaitingAndRefuseUntil(until)
    )
    #expect(cycle.refusingUntil == until)
    #expect(cycle.refusal(now: now.advanced(by: .milliseconds(499))) == unreachable)
    #expect(cycle.followerMayApply, "the node is as current as the log: it follows it")
    #expect(cycle.refusal(now: until) == nil)
    var expected = committed(turns: 1)
    _ = expected.inputsWaiting()
    #expect(expected.turnCommitted(2) == .answer)
    #expect(cycle == expected, "once the moment is over, nothing of the failure remains")
  }

  @Test(
    "a turn that fails after deciding rebuilds the node: no turn, no follower, every request refused until rejoined"
  )
  func rejoinAfterDecidedFailure() {
    var cycle = committed(turns: 1)
    #expect(cycle.inputsWaiting() == .startTurn(number: 2))
    cycle.turnDecided(2)
    #expect(!cycle.followerMayApply, "the turn applies what others committed itself")
    #expect(cycle.turnFailed(2, with: unreachable, logStopped: false, now: now, refuseFor: .seconds(1)) == .rejoin)
    #expect(cycle.rejoiningAfter == unreachable)
    #expect(!cycle.isTurnUnderWay && !cycle.followerMayApply)
    #expect(cycle.inputsWaiting() == .none, "no turn while the node rebuilds itself")
    #expect(cycle.inboxAnnounced() == .none)
    #expect(cycle.refusal(now: now.advanced(by: .seconds(3600))) == unreachable, "refused for as long as it takes")
    cycle.rejoined()
    #expect(cycle.rejoins == 1 && cycle.rejoiningAfter == nil && cycle.refusal(now: now) == nil)
    #expect(cycle.inputsWaiting(false) == .startTurn(number: 3), "the inbox announced meanwhile is still owed")
  }

  @Test("a log that stopped for good fails the turn's inputs without a rebuild or a moment of refusal")
  func stoppedLogFailsWaiting() {
    var cycle = committed(turns: 1)
    _ = cycle.inputsWaiting()
    cycle.turnDecided(2)
    #expect(cycle.turnFailed(2, with: unreachable, logStopped: true, now: now, refuseFor: .seconds(1)) == .failWaiting)
    #expect(cycle == committed(turns: 2), "between turns, nothing to refuse: the log's own failure refuses")
  }

  @Test("the timer's decision waits for a turn once, however often the timer fires")
  func timerDecisionOnce() {
    var cycle = TurnCycle()
    #expect(cycle.timerFired() == .enqueue)
    #expect(cycle.timerFired() == .alreadyWaiting)
    cycle.timerDecisionEnded()
    #expect(cycle == TurnCycle())
    #expect(cycle.timerFired() == .enqueue)
  }
}
