import EventProtocol
import Foundation
import Simulation

/// One self-contained HTML page (inline SVG, no scripts, no network): per run, the share of time in each
/// freshness state and the moments that mattered; across strategies, staleness and cost as bar charts.
struct HTMLReport {
  let reports: [SimulationReport]

  /// Writes the page through a temporary of our own name beside it (`<name>.tmp`), renamed over `url`: a kill
  /// leaves at most that file, never Foundation's hidden one.
  func write(to url: URL) throws {
    try DurableFile.replace(url.path, with: Data(page.utf8), through: url.path + ".tmp")
  }

  private var page: String {
    let colors = ["live": "#2e9d57", "settling": "#9ccc65", "connecting": "#f0ad4e", "cannot connect": "#d9534f"]
    var body = "<h1>Video messaging on a flaky network</h1>"
    if let first = reports.first {
      body +=
        "<p>Seed \(first.scenario.seed), \(first.scenario.users) users × \(first.scenario.devicesPerUser) device(s).</p>"
    }
    if reports.count > 1 {
      body += "<h2>Strategies side by side</h2>"
      body += "<p>One seed: for figures with confidence intervals over many seeds, run the Demo with --answer.</p>"
      body += barChart(title: "Wrong status while the user looks, p99 (seconds on screen)") {
        $0.wrongStatusWhileOpen.p99
      }
      body += barChart(title: "Wrong status on opening the app, p99 (seconds on screen)") {
        $0.wrongStatusAfterOpening.p99
      }
      body += barChart(title: "A change made while closed reaches the device, p99 (seconds)") {
        $0.backgroundStaleness.p99
      }
      body += barChart(title: "Server requests + pushes per device-hour (cost)") {
        $0.serverRequestsPerDeviceHour + $0.pushesSentPerDeviceHour
      }
      body += barChart(title: "Sync kilobytes per device-hour (video content apart)") { $0.bytesPerDeviceHour / 1000 }
    }
    for report in reports {
      body += "<h2>\(report.scenario.strategy): \(report.converged ? "converged" : "NOT converged")</h2>"
      var x = 0.0
      var bar = ""
      for name in ["live", "settling", "connecting", "cannot connect"] {
        let width = (report.freshnessShare[name] ?? 0) * 600
        bar += "<rect x='\(x)' y='0' width='\(width)' height='24' fill='\(colors[name]!)'><title>\(name)</title></rect>"
        x += width
      }
      body += "<p>Share of open-app time in each freshness state (live, settling, connecting, cannot connect):</p>"
      for (index, name) in ["live", "settling", "connecting", "cannot connect"].enumerated() {
        let x = Double(index) * 130
        bar += "<rect x='\(x)' y='30' width='12' height='12' fill='\(colors[name]!)'/>"
        bar += "<text x='\(x + 16)' y='40' font-size='12'>\(name) \(percent(report.freshnessShare[name] ?? 0))</text>"
      }
      body += "<svg width='600' height='46' role='img' aria-label='freshness shares' "
      body += "xmlns='http://www.w3.org/2000/svg'>\(bar)</svg>"
      body += deviceTimelines(report, colors: colors)
      let shown = report.timeline.prefix(60)
      body += "<h3>The moments that matter</h3>"
      if report.timeline.count > shown.count {
        body += "<p>The first \(shown.count) of \(report.timeline.count) (the Demo's --trace prints every step).</p>"
      }
      body += "<ul>" + shown.map { "<li>\(escape($0))</li>" }.joined() + "</ul>"
    }
    return """
      <!doctype html><html><head><meta charset="utf-8"><title>Simulation report</title>
      <style>body{font-family:system-ui,sans-serif;max-width:900px;margin:2em auto}li{font-family:monospace;font-size:12px}</style>
      </head><body>\(body)</body></html>
      """
  }

  /// Per device, a strip over the whole run: grey while the app is closed, else the freshness its user saw.
  private func deviceTimelines(_ report: SimulationReport, colors: [String: String]) -> String {
    let total = max(report.scenario.duration.inSeconds + (report.settleTime?.inSeconds ?? 0), 1)
    var svg = ""
    for (device, changes) in report.freshnessTimelines.enumerated() {
      let y = device * 22
      svg += "<text x='0' y='\(y + 14)' font-size='12'>device \(device)</text>"
      for (index, change) in changes.enumerated() {
        let end = index + 1 < changes.count ? changes[index + 1].seconds : total
        let x = 70 + change.seconds / total * 700
        let width = max((end - change.seconds) / total * 700, 0.5)
        let color = colors[change.state] ?? "#dddddd"
        svg +=
          "<rect x='\(x)' y='\(y + 2)' width='\(width)' height='16' fill='\(color)'><title>\(change.state)</title></rect>"
      }
    }
    let rows = report.freshnessTimelines.count * 22
    let hours = total / 3600
    let step = hours > 12 ? 6.0 : hours > 4 ? 2.0 : hours > 1 ? 1.0 : 0.25
    var hour = 0.0
    while hour <= hours {
      let x = 70 + hour * 3600 / total * 700
      svg += "<line x1='\(x)' y1='\(rows)' x2='\(x)' y2='\(rows + 5)' stroke='#555'/>"
      svg +=
        "<text x='\(x)' y='\(rows + 17)' font-size='11' text-anchor='middle'>\(String(format: "%g", hour)) h</text>"
      hour += step
    }
    svg += "<text x='420' y='\(rows + 32)' font-size='12' text-anchor='middle'>time since the start (hours)</text>"
    for (index, name) in ["live", "settling", "connecting", "cannot connect", "closed"].enumerated() {
      let x = 70 + index * 130
      svg += "<rect x='\(x)' y='\(rows + 40)' width='12' height='12' fill='\(colors[name] ?? "#dddddd")'/>"
      svg += "<text x='\(x + 16)' y='\(rows + 50)' font-size='12'>\(name)</text>"
    }
    return "<p>Per device, over the run: the freshness its user saw while the app was open.</p>"
      + "<svg width='780' height='\(rows + 58)' role='img' aria-label='freshness per device' "
      + "xmlns='http://www.w3.org/2000/svg'>\(svg)</svg>"
  }

  private func barChart(title: String, _ value: (SimulationReport) -> Double) -> String {
    let values = reports.map(value)
    let top = max(values.max() ?? 1, 0.001)
    var svg = ""
    for (index, report) in reports.enumerated() {
      let width = values[index] / top * 400
      let y = index * 26
      svg += "<text x='0' y='\(y + 16)' font-size='12'>\(report.scenario.strategy)</text>"
      svg += "<rect x='140' y='\(y + 4)' width='\(width)' height='16' fill='#4a78c2'/>"
      svg += "<text x='\(145 + width)' y='\(y + 16)' font-size='12'>\(String(format: "%.1f", values[index]))</text>"
    }
    return
      "<h3>\(title)</h3><svg width='640' height='\(reports.count * 26)' xmlns='http://www.w3.org/2000/svg'>\(svg)</svg>"
  }

  private func percent(_ share: Double) -> String { String(format: "%.0f%%", share * 100) }

  private func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
  }
}
