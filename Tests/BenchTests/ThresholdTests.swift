import Foundation
import Testing

@testable import Bench

@Suite("Bench --check's thresholds")
struct ThresholdTests {
  @Test("a rule reads its figure, bound, floor, offset and target")
  func parsesRules() throws {
    let rules = try Threshold.parse(
      """
      # a comment, then a blank line

      W4.wake_p99 <= 2.5 x W4.floor_wake_p99 target 1.25   # trailing comment
      C1.save <= 1 x C1.fsync + 0.5
      W2.bytes_per_idle_queue <= 200
      N1.four_nodes_over_one >= 3 target 3
      """
    )
    #expect(
      rules == [
        Threshold(
          figure: "W4.wake_p99",
          comparison: .atMost,
          factor: 2.5,
          floor: "W4.floor_wake_p99",
          offset: 0,
          target: 1.25,
          line: 3
        ),
        Threshold(
          figure: "C1.save",
          comparison: .atMost,
          factor: 1,
          floor: "C1.fsync",
          offset: 0.5,
          target: nil,
          line: 4
        ),
        Threshold(
          figure: "W2.bytes_per_idle_queue",
          comparison: .atMost,
          factor: 200,
          floor: nil,
          offset: 0,
          target: nil,
          line: 5
        ),
        Threshold(
          figure: "N1.four_nodes_over_one",
          comparison: .atLeast,
          factor: 3,
          floor: nil,
          offset: 0,
          target: 3,
          line: 6
        ),
      ]
    )
    #expect(rules[0].workload == "W4")
  }

  @Test(
    "a line that is not a rule is refused with its number and reason",
    arguments: [
      ("W4.wake_p99 < 2", "'<' is not '<=' or '>='"),
      ("W4.wake_p99 <= fast", "'fast' is not a number"),
      ("wake_p99 <= 2", "'wake_p99' is not a figure (WORKLOAD.metric)"),
      ("W4.wake_p99 <= 2 x", "'x' needs a value after it"),
      ("W4.wake_p99 <= 2 times W4.floor", "'times' is not 'x', '+' or 'target'"),
      ("W4.wake_p99 <= 2 target 1 x W4.floor", "'x' comes right after the bound"),
      ("W4.wake_p99 <=", "a rule is 'FIGURE <= BOUND' or 'FIGURE >= BOUND'"),
      ("W4.wake_p99 <= nan", "'nan' is not a number"),
    ]
  )
  func refusesMalformedLines(line: String, reason: String) {
    #expect(throws: Threshold.ParseError(line: 2, reason: reason)) {
      try Threshold.parse("W2.bytes_per_idle_queue <= 200\n\(line)")
    }
  }

  @Test("a figure within its bound holds; past it, or missing from a workload that ran, fails the check")
  func verdicts() throws {
    let rules = try Threshold.parse(
      """
      W4.wake_p99 <= 2.5 x W4.floor target 1.25
      C1.save <= 1 x C1.fsync + 0.5
      N1.ratio >= 3
      G1.growth <= 13
      """
    )
    let figures = ["W4.wake_p99": 30.0, "W4.floor": 20.0, "C1.save": 0.7, "C1.fsync": 0.1, "N1.ratio": 3.6]
    let ran: Set<String> = ["W4", "C1", "N1", "G1"]
    #expect(rules[0].verdict(figures: figures, ran: ran) == .holds(value: 30, bound: 50, targetMet: false))
    #expect(rules[1].verdict(figures: figures, ran: ran) == .exceeded(value: 0.7, bound: 0.6))
    #expect(rules[2].verdict(figures: figures, ran: ran) == .holds(value: 3.6, bound: 3, targetMet: nil))
    #expect(rules[3].verdict(figures: figures, ran: ran) == .missing("G1.growth"))
    #expect(rules[3].verdict(figures: figures, ran: ["W4"]) == .notRun)
    var noFloor = figures
    noFloor["W4.floor"] = nil
    #expect(rules[0].verdict(figures: noFloor, ran: ran) == .missing("W4.floor"))
    #expect(rules[2].verdict(figures: ["N1.ratio": 2.9], ran: ran) == .exceeded(value: 2.9, bound: 3))

    let failing = ThresholdReport(rules: rules, figures: figures, ran: ran)
    #expect(!failing.passed)
    #expect(failing.lines.last == "check: FAILED: 2 hold, 1 exceeded, 1 missing, 0 not run; targets 0 met, 1 not met")
    #expect(failing.lines.contains("check C1.save 0.7 <= 0.6 (<= 1 x C1.fsync + 0.5): EXCEEDED (line 2)"))
    let passing = ThresholdReport(
      rules: rules,
      figures: figures.merging(["C1.save": 0.5]) { $1 },
      ran: ["W4", "C1", "N1"]
    )
    #expect(passing.passed)
    #expect(passing.lines.first == "check W4.wake_p99 30 <= 50 (<= 2.5 x W4.floor, target 1.25): holds; target not met")
  }

  @Test("the shipped thresholds file reads, and names only workloads Bench runs")
  func shippedThresholds() throws {
    let url = URL(fileURLWithPath: #filePath)
      .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
      .appendingPathComponent("Benchmarks/thresholds")
    let rules = try Threshold.parse(String(contentsOf: url, encoding: .utf8))
    #expect(rules.count >= 10)
    let workloads: Set<String> = ["W1", "W2", "W3", "W4", "C1", "G1", "N1"]
    for rule in rules {
      #expect(workloads.contains(rule.workload), "line \(rule.line): \(rule.figure)")
      if let floor = rule.floor { #expect(floor.hasPrefix(rule.workload + "."), "line \(rule.line): \(floor)") }
    }
  }
}
