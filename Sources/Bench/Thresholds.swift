/// What `Bench --check` holds a run to: one rule per line of a thresholds file (`Benchmarks/thresholds`).
///
/// A rule bounds one figure by a number (a count: bytes, a ratio the workload printed) or by a multiple of
/// another figure of the same run (a floor measured in the same minutes, so the rule holds on a noisy
/// machine), with an optional offset in the figure's own unit:
///
/// ```
/// W4.wake_p99 <= 2.5 x W4.floor_holding_command_p50_wake_p99 target 1.25
/// C1.save_one_event_batch_10000_videos_file_with_fsync <= 1 x C1.fsync_of_an_empty_append + 0.5
/// W2.bytes_per_idle_queue <= 200
/// ```
///
/// The bound is what fails the run (a regression); `target`, when given, replaces the bound's factor (or,
/// for a rule without a floor, its number) to say whether the issue's target is met, which is reported and
/// never fails the run. `#` starts a comment.
struct Threshold: Equatable, Sendable {
  enum Comparison: String, Sendable {
    case atMost = "<="
    case atLeast = ">="
  }

  /// The figure judged, as `WORKLOAD.metric`.
  var figure: String
  var comparison: Comparison
  /// The bound: a number, or the multiple of ``floor`` when there is one.
  var factor: Double
  /// The figure of the same run the bound multiplies, if any.
  var floor: String?
  /// Added to the bound after the multiplication, in the figure's unit.
  var offset: Double
  /// The issue's target, in the same terms as ``factor``.
  var target: Double?
  /// The line of the file the rule is on, for messages.
  var line: Int

  /// The workload whose run prints ``figure`` (`W4` for `W4.wake_p99`).
  var workload: String { String(figure.prefix { $0 != "." }) }

  /// A rule of a thresholds file that cannot be read.
  struct ParseError: Error, Equatable, CustomStringConvertible {
    var line: Int
    var reason: String
    var description: String { "line \(line): \(reason)" }
  }

  /// The rules of a thresholds file's text, in order.
  /// - Throws: ``ParseError`` naming the first line that is not a rule, a comment or blank.
  static func parse(_ text: String) throws(ParseError) -> [Threshold] {
    var rules: [Threshold] = []
    for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
      let content = rawLine.prefix { $0 != "#" }
      let words = content.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
      if words.isEmpty { continue }
      rules.append(try rule(words, line: index + 1))
    }
    return rules
  }

  private static func rule(_ words: [String], line: Int) throws(ParseError) -> Threshold {
    func fail(_ reason: String) -> ParseError { ParseError(line: line, reason: reason) }
    func number(_ word: String) throws(ParseError) -> Double {
      guard let value = Double(word), value.isFinite else { throw fail("'\(word)' is not a number") }
      return value
    }
    func figureName(_ word: String) throws(ParseError) -> String {
      let parts = word.split(separator: ".", omittingEmptySubsequences: false)
      guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
        throw fail("'\(word)' is not a figure (WORKLOAD.metric)")
      }
      return word
    }
    guard words.count >= 3 else { throw fail("a rule is 'FIGURE <= BOUND' or 'FIGURE >= BOUND'") }
    guard let comparison = Comparison(rawValue: words[1]) else {
      throw fail("'\(words[1])' is not '<=' or '>='")
    }
    var rule = Threshold(
      figure: try figureName(words[0]),
      comparison: comparison,
      factor: try number(words[2]),
      floor: nil,
      offset: 0,
      target: nil,
      line: line
    )
    var rest = words.dropFirst(3)
    while let keyword = rest.popFirst() {
      guard let operand = rest.popFirst() else { throw fail("'\(keyword)' needs a value after it") }
      switch keyword {
      case "x":
        guard rule.floor == nil, rule.offset == 0, rule.target == nil else {
          throw fail("'x' comes right after the bound")
        }
        rule.floor = try figureName(operand)
      case "+":
        guard rule.offset == 0, rule.target == nil else { throw fail("one '+' per rule, before 'target'") }
        rule.offset = try number(operand)
      case "target":
        guard rule.target == nil else { throw fail("one 'target' per rule") }
        rule.target = try number(operand)
      default:
        throw fail("'\(keyword)' is not 'x', '+' or 'target'")
      }
    }
    return rule
  }

  /// What a run's figures make of this rule.
  enum Verdict: Equatable, Sendable {
    /// The figure is within its bound; `targetMet` is nil when the rule names no target.
    case holds(value: Double, bound: Double, targetMet: Bool?)
    /// The figure is past its bound: a regression.
    case exceeded(value: Double, bound: Double)
    /// The figure or its floor was not printed though its workload ran (a renamed or removed metric).
    case missing(String)
    /// The rule's workload was not run.
    case notRun
  }

  /// Judges `figures` (`WORKLOAD.metric` to value) of a run of the workloads in `ran`.
  func verdict(figures: [String: Double], ran: Set<String>) -> Verdict {
    guard ran.contains(workload) else { return .notRun }
    guard let value = figures[figure] else { return .missing(figure) }
    var scale = 1.0
    if let floor {
      guard let floorValue = figures[floor] else { return .missing(floor) }
      scale = floorValue
    }
    let bound = factor * scale + offset
    guard within(value, bound) else { return .exceeded(value: value, bound: bound) }
    return .holds(value: value, bound: bound, targetMet: target.map { within(value, $0 * scale + offset) })
  }

  private func within(_ value: Double, _ bound: Double) -> Bool {
    switch comparison {
    case .atMost: value <= bound
    case .atLeast: value >= bound
    }
  }
}
