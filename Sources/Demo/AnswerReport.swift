import EventProtocol
import Foundation
import Simulation

/// The `--answer` page (inline SVG, no scripts, no network): the answer in words first, then the frontier
/// of cost against each experience figure with the chosen configuration marked and the target drawn, then
/// every point's figures with their 95% intervals.
struct AnswerReport {
  let answer: SweepAnswer
  let scenario: Scenario
  let seedsPerPoint: Int

  func write(to url: URL) throws {
    try DurableFile.replace(url.path, with: Data(page.utf8), through: url.path + ".tmp")
  }

  static let colors: [DeliveryStrategy: String] = [
    .pollOnly: "#8e44ad", .pushOnly: "#d35400", .pushPlusPoll: "#2e7d32", .pushPlusPollPayload: "#1565c0",
  ]

  var results: [SweepResult] { answer.results }

  var page: String {
    var body = "<h1>The cheapest way to keep a sender's status right</h1>"
    body += "<p class='answer'>\(escape(AnswerDemo.verdict(answer)))</p>"
    body +=
      "<p>Target, on the upper end of each 95% interval: \(escape(answer.target.description)). "
      + "Platform \(scenario.platform), \(scenario.users) users × \(scenario.devicesPerUser) device(s), "
      + "\(AnswerDemo.number(scenario.duration.inSeconds / 3600)) h per seed, \(seedsPerPoint) seeds per point; "
      + "every configuration meets the same users, network and OS (common random numbers).</p>"
    body += legend()
    body += frontier(
      title: "Cost against wrong status while the user looks",
      yLabel: "while open, p99 (s)",
      target: answer.target.whileOpenP99
    ) { $0.whileOpenP99 }
    body += frontier(
      title: "Cost against wrong status on opening the app",
      yLabel: "after opening, p99 (s)",
      target: answer.target.afterOpeningP99
    ) { $0.afterOpeningP99 }
    body += frontier(
      title: "Cost against how long a closed app lacks a change",
      yLabel: "closed, median (s)",
      target: answer.target.closedMedian
    ) { $0.closedMedian }
    body += table()
    return """
      <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Simulation: the answer</title>
      <style>body{font-family:system-ui,sans-serif;max-width:960px;margin:2em auto;color:#222}
      .answer{font-size:1.2em;font-weight:600;background:#eef6ee;padding:.8em;border-left:4px solid #2e7d32}
      table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left}
      tr.chosen{background:#eef6ee;font-weight:600}</style>
      </head><body>\(body)</body></html>
      """
  }

  private func legend() -> String {
    var svg = ""
    var x = 0
    for strategy in DeliveryStrategy.allCases {
      svg += "<circle cx='\(x + 8)' cy='10' r='6' fill='\(Self.colors[strategy]!)'/>"
      svg += "<text x='\(x + 18)' y='14' font-size='12'>\(strategy)</text>"
      x += 150
    }
    svg += "<circle cx='8' cy='34' r='5' fill='#777'/><text x='18' y='38' font-size='12'>engine's deadlines</text>"
    svg += "<rect x='145' y='29' width='10' height='10' fill='#777'/>"
    svg += "<text x='160' y='38' font-size='12'>short request deadlines</text>"
    svg += "<circle cx='318' cy='34' r='9' fill='none' stroke='#000' stroke-width='2'/>"
    svg += "<text x='332' y='38' font-size='12'>chosen</text>"
    svg += "<line x1='400' y1='34' x2='425' y2='34' stroke='#c62828' stroke-dasharray='4 3'/>"
    svg += "<text x='430' y='38' font-size='12'>target</text>"
    svg += "<line x1='490' y1='26' x2='490' y2='42' stroke='#777' stroke-width='1.5'/>"
    svg += "<text x='497' y='38' font-size='12'>95% interval</text>"
    return "<p>Legend (a point's label gives poll-only's interval or the share of pushes lost):</p>"
      + "<svg width='900' height='46' role='img' aria-label='legend' xmlns='http://www.w3.org/2000/svg'>\(svg)</svg>"
  }

  /// A scatter of server cost (x, linear) against an experience figure (y, log scale), each point with its
  /// interval as a vertical bar, the target as a dashed line.
  private func frontier(
    title: String,
    yLabel: String,
    target: Double,
    _ figure: (SweepResult) -> Estimate
  ) -> String {
    let (width, height, left, bottom) = (860.0, 340.0, 70.0, 50.0)
    let plotWidth = width - left - 20
    let plotHeight = height - bottom - 20
    let maxCost = max(results.map(\.serverCost.high).max() ?? 1, 1) * 1.1
    let values = results.map(figure)
    let low = max(min(values.map(\.low).filter { $0 > 0 }.min() ?? 0.1, target) / 2, 0.01)
    let high = max(values.map(\.high).max() ?? 1, target) * 2
    func x(_ cost: Double) -> Double { left + cost / maxCost * plotWidth }
    func y(_ seconds: Double) -> Double {
      let clamped = min(max(seconds, low), high)
      return 20 + plotHeight * (1 - (log10(clamped) - log10(low)) / (log10(high) - log10(low)))
    }
    var svg = "<rect x='\(left)' y='20' width='\(plotWidth)' height='\(plotHeight)' fill='#fafafa' stroke='#999'/>"
    let step = Self.niceStep(maxCost / 6)
    var cost = 0.0
    while cost <= maxCost {
      svg += "<line x1='\(x(cost))' y1='\(20 + plotHeight)' x2='\(x(cost))' y2='\(25 + plotHeight)' stroke='#555'/>"
      svg += "<text x='\(x(cost))' y='\(38 + plotHeight)' font-size='11' text-anchor='middle'>\(Int(cost))</text>"
      cost += step
    }
    var tick = pow(10, floor(log10(low)))
    while tick <= high {
      if tick >= low {
        svg += "<line x1='\(left - 5)' y1='\(y(tick))' x2='\(left + plotWidth)' y2='\(y(tick))' stroke='#e3e3e3'/>"
        svg +=
          "<text x='\(left - 8)' y='\(y(tick) + 4)' font-size='11' text-anchor='end'>\(Percentiles.format(tick))</text>"
      }
      tick *= 10
    }
    svg +=
      "<text x='\(left + plotWidth / 2)' y='\(height - 5)' font-size='12' text-anchor='middle'>"
      + "server requests + pushes per device-hour (cost)</text>"
    svg +=
      "<text transform='translate(14 \(20 + plotHeight / 2)) rotate(-90)' font-size='12' text-anchor='middle'>"
      + "\(escape(yLabel))</text>"
    svg +=
      "<line x1='\(left)' y1='\(y(target))' x2='\(left + plotWidth)' y2='\(y(target))' stroke='#c62828' "
      + "stroke-dasharray='6 4'/>"
    for (result, value) in zip(results, values) {
      let color = Self.colors[result.point.strategy] ?? "#555"
      let px = x(result.serverCost.value)
      svg +=
        "<line x1='\(px)' y1='\(y(value.low))' x2='\(px)' y2='\(y(value.high))' stroke='\(color)' stroke-width='1.5'/>"
      let tip =
        "<title>\(escape(result.point.description)): \(Percentiles.format(value.value)) at "
        + "\(Estimate.short(result.serverCost.value)) per device-hour</title>"
      if result.point.requestDeadlineSeconds == nil {
        svg += "<circle cx='\(px)' cy='\(y(value.value))' r='5' fill='\(color)'>\(tip)</circle>"
      } else {
        svg += "<rect x='\(px - 5)' y='\(y(value.value) - 5)' width='10' height='10' fill='\(color)'>\(tip)</rect>"
      }
      if answer.isChosen(result) {
        svg += "<circle cx='\(px)' cy='\(y(value.value))' r='9' fill='none' stroke='#000' stroke-width='2'/>"
      }
      let label =
        result.point.foregroundPollSeconds.map { "\($0) s" }
        ?? (result.point.strategy.usesPushes ? "\(Int((result.point.pushLoss * 100).rounded()))%" : "")
      svg += "<text x='\(px + 8)' y='\(y(value.value) - 6)' font-size='10' fill='\(color)'>\(label)</text>"
    }
    return "<h2>\(escape(title))</h2><p>Log scale; lower is better, left is cheaper.</p>"
      + "<svg width='\(Int(width))' height='\(Int(height))' role='img' aria-label='\(escape(title))' "
      + "xmlns='http://www.w3.org/2000/svg'>\(svg)</svg>"
  }

  /// 1, 2 or 5 times a power of ten, at least `rough`.
  static func niceStep(_ rough: Double) -> Double {
    let power = pow(10, floor(log10(max(rough, 1e-9))))
    return [1.0, 2, 5, 10].map { $0 * power }.first { $0 >= rough } ?? 10 * power
  }

  private func table() -> String {
    var html =
      "<h2>Every point, with 95% intervals</h2><table><tr><th>configuration</th><th>pushes lost</th>"
      + "<th>server req+push /dev-h</th><th>while open p99</th><th>after opening p99</th><th>closed median</th>"
      + "<th>sync kB /dev-h</th><th>parked s /dev-h</th><th>content kB /dev-h</th><th>meets</th></tr>"
    for result in results {
      let isBaseline = result.point == SweepPoint.baseline
      html += answer.isChosen(result) ? "<tr class='chosen'>" : "<tr>"
      let cells = [
        result.point.configuration + (isBaseline ? " (baseline)" : ""),
        result.point.strategy.usesPushes ? "\(Int((result.point.pushLoss * 100).rounded()))%" : "—",
        result.serverCost.description,
        AnswerDemo.seconds(result.whileOpenP99),
        AnswerDemo.seconds(result.afterOpeningP99),
        AnswerDemo.seconds(result.closedMedian),
        result.syncKilobytes.description,
        result.parkedSeconds.description,
        Estimate.short(result.contentKilobytes.value),
        result.meets(answer.target) ? "yes" : "no",
      ]
      html += cells.map { "<td>\(escape($0))</td>" }.joined() + "</tr>"
    }
    return html + "</table>"
  }

  private func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
      .replacingOccurrences(of: "'", with: "&#39;")
  }
}
