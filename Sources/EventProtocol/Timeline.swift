/// Converts an injected `Clock` into ``Timestamp``s and back, for shells that drive pure state machines.
///
/// A timeline reads the clock once to pair one of its instants with a wall-clock anchor. After that,
/// ``now()`` is the anchor plus the clock's elapsed time, so a `ManualClock` in a test gives exact,
/// reproducible timestamps and a `ContinuousClock` in an app gives real ones.
///
/// ```swift
/// let timeline = Timeline(clock: ContinuousClock())
/// let deadline = timeline.now().advanced(by: .seconds(1))
/// try await timeline.sleep(until: deadline)
/// ```
public struct Timeline<C: Clock>: Sendable where C.Duration == Duration {
  /// The clock that measures elapsed time and performs sleeps.
  public let clock: C
  private let originInstant: C.Instant
  private let originTimestamp: Timestamp

  /// Creates a timeline.
  /// - Parameters:
  ///   - clock: The clock to read and sleep on.
  ///   - anchor: The timestamp that the clock's current instant stands for; the wall clock's when `nil`.
  public init(clock: C, anchor: Timestamp? = nil) {
    self.clock = clock
    self.originInstant = clock.now
    self.originTimestamp = anchor ?? .wallClockNow()
  }

  /// The current time, as a timestamp.
  public func now() -> Timestamp {
    originTimestamp.advanced(by: originInstant.duration(to: clock.now))
  }

  /// Sleeps on the clock until `deadline`.
  /// - Throws: `CancellationError` when the task is cancelled first.
  public func sleep(until deadline: Timestamp) async throws {
    try await clock.sleep(until: originInstant.advanced(by: originTimestamp.duration(to: deadline)), tolerance: nil)
  }
}
