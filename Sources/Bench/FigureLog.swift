import Foundation
import Synchronization

/// The figures a run has printed, by `WORKLOAD.metric`, for `--check` to judge at the end.
final class FigureLog: Sendable {
  private let figures = Mutex<[String: Double]>([:])

  /// Prints `workload metric value unit` (the line format every workload uses) and keeps the value.
  func record(_ workload: String, _ metric: String, _ value: Double, _ unit: String, format: String = "%.4g") {
    print("\(workload) \(metric) \(String(format: format, value)) \(unit)")
    figures.withLock { $0["\(workload).\(metric)"] = value }
  }

  /// Every figure recorded so far.
  var all: [String: Double] { figures.withLock { $0 } }
}
