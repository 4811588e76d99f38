import Foundation

/// `--check`'s verdict on a run: one line per rule of the thresholds file, then a summary line.
struct ThresholdReport {
  /// Each rule beside what the run made of it, in the file's order.
  let verdicts: [(rule: Threshold, verdict: Threshold.Verdict)]

  init(rules: [Threshold], figures: [String: Double], ran: Set<String>) {
    verdicts = rules.map { ($0, $0.verdict(figures: figures, ran: ran)) }
  }

  /// True when no rule's figure is past its bound and none is missing from a workload that ran.
  var passed: Bool {
    verdicts.allSatisfy {
      switch $0.verdict {
      case .holds, .notRun: true
      case .exceeded, .missing: false
      }
    }
  }

  /// What to print: `check FIGURE VALUE <= BOUND (RULE): holds[; target met|not met]`, `…: EXCEEDED` or
  /// `…: MISSING` per rule (a rule whose workload did not run prints nothing), then the summary line.
  var lines: [String] {
    var lines: [String] = []
    var counts = (holds: 0, exceeded: 0, missing: 0, notRun: 0, targetsMet: 0, targetsNotMet: 0)
    for (rule, verdict) in verdicts {
      let written = Self.written(rule)
      switch verdict {
      case .holds(let value, let bound, let targetMet):
        counts.holds += 1
        var line = "check \(rule.figure) \(Self.number(value)) \(rule.comparison.rawValue) \(Self.number(bound))"
        line += " (\(written)): holds"
        if let targetMet {
          if targetMet { counts.targetsMet += 1 } else { counts.targetsNotMet += 1 }
          line += targetMet ? "; target met" : "; target not met"
        }
        lines.append(line)
      case .exceeded(let value, let bound):
        counts.exceeded += 1
        lines.append(
          "check \(rule.figure) \(Self.number(value)) \(rule.comparison.rawValue) \(Self.number(bound))"
            + " (\(written)): EXCEEDED (line \(rule.line))"
        )
      case .missing(let figure):
        counts.missing += 1
        lines.append("check \(rule.figure) (\(written)): MISSING, the run printed no \(figure) (line \(rule.line))")
      case .notRun:
        counts.notRun += 1
      }
    }
    lines.append(
      "check: \(passed ? "passed" : "FAILED"): \(counts.holds) hold, \(counts.exceeded) exceeded, "
        + "\(counts.missing) missing, \(counts.notRun) not run; targets \(counts.targetsMet) met, "
        + "\(counts.targetsNotMet) not met"
    )
    return lines
  }

  /// The rule as the file states it, after the comparison.
  private static func written(_ rule: Threshold) -> String {
    var text = "\(rule.comparison.rawValue) \(number(rule.factor))"
    if let floor = rule.floor { text += " x \(floor)" }
    if rule.offset != 0 { text += " + \(number(rule.offset))" }
    if let target = rule.target { text += ", target \(number(target))" }
    return text
  }

  private static func number(_ value: Double) -> String { String(format: "%.4g", value) }
}
