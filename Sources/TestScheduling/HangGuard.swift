import Testing

extension Trait where Self == TimeLimitTrait {
  /// The time limit for a test that waits on something that cannot end by itself (a stream of snapshots, a
  /// manual clock, a socket): long enough that only a hang meets it, whatever else the machine and the test
  /// process are doing.
  ///
  /// A time limit is wall-clock time, and a test in a full run does not get the machine to itself: Swift
  /// Testing starts every test at once, so an async test's every hop waits its turn behind the other tests'
  /// work on the thread that ``CPUBound`` leaves free. Beside two busy processes on a 2-core machine, the
  /// greeting example of docs/testing.md (5 ms alone) took 63 s from its start to its end in a full run, and
  /// a one-minute limit failed it once. The limit is ten minutes, about the length of the whole run on a busy
  /// machine: a test that has not ended by then is hung, not slow, and the verdict does not depend on the
  /// machine's speed or load.
  ///
  /// ```swift
  /// @Suite("the machine on a manual clock", .hangGuard)
  /// struct ManualClockTests { … }
  /// ```
  public static var hangGuard: Self { .timeLimit(.minutes(10)) }
}
