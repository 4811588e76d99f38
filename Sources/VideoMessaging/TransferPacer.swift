import EventProtocol

/// How many bytes a transfer moves per step, so progress shows within a few seconds whatever the link:
/// a pure rule from how long the last step took.
///
/// A step is one blob-store request, and progress is reported (and the offset to resume from saved) after
/// each. A fixed 64 KiB step takes 20 minutes at 50 bytes a second; the pacer starts at
/// ``minimumStep`` and sizes each next step to take about ``targetStepDuration`` at the rate the last one
/// measured, growing at most fourfold per step up to ``maximumStep`` on a fast link. Resuming is unchanged:
/// every step ends at a byte offset the store keeps.
///
/// ```swift
/// var pacer = TransferPacer(maximumStep: 64 << 10)
/// let length = pacer.nextStep                                // 128 bytes first
/// pacer.stepCompleted(bytes: length, took: .milliseconds(40))   // next: 512
/// ```
public struct TransferPacer: Sendable, Hashable {
  /// The largest step (the device's chunk size).
  public let maximumStep: Int
  /// The smallest step: the first one, and the floor on slow links (128 bytes by default).
  public let minimumStep: Int
  /// How long a step should take (2 s by default).
  public let targetStepDuration: Duration
  /// How many bytes the next step asks for.
  public private(set) var nextStep: Int

  /// A pacer for one transfer.
  public init(maximumStep: Int, minimumStep: Int = 128, targetStepDuration: Duration = .seconds(2)) {
    self.maximumStep = max(maximumStep, 1)
    self.minimumStep = max(1, min(minimumStep, self.maximumStep))
    self.targetStepDuration = targetStepDuration
    self.nextStep = self.minimumStep
  }

  /// A step moved `bytes` in `took`: the next step is sized to take about ``targetStepDuration``.
  public mutating func stepCompleted(bytes: Int, took: Duration) {
    let seconds = Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
    let grown = nextStep.multipliedReportingOverflow(by: 4)
    let ceiling = min(maximumStep, grown.overflow ? maximumStep : grown.partialValue)
    guard seconds > 0, bytes > 0 else {
      nextStep = bytes > 0 ? ceiling : nextStep
      return
    }
    let target =
      Double(targetStepDuration.components.seconds) + Double(targetStepDuration.components.attoseconds) / 1e18
    let ideal = Double(bytes) / seconds * target
    nextStep = ideal >= Double(ceiling) ? ceiling : max(minimumStep, min(ceiling, Int(ideal)))
  }
}
