import Foundation

/// How many seeds a seeded property or simulation test runs: its full count in a full run (the long suite
/// sets `UPDATE_MACHINE_SEEDS=full`), the first of them otherwise.
///
/// The largest seeded tests took nine tenths of the root suite's time; every run (`swift test`, the gate)
/// takes the first seeds of each, and the long suite all of them, so a failing seed found by either
/// replays in both. Seed counts in the docs are a full run's.
///
/// ```swift
/// @Test("converges under faults", .cpuBound, arguments: TestSeeds.first(200, of: 1_000))
/// func converges(seed: UInt64) { … }
/// ```
public enum TestSeeds {
  /// The environment variable that asks for every test's full count: `UPDATE_MACHINE_SEEDS=full`.
  public static let environmentVariable = "UPDATE_MACHINE_SEEDS"

  /// Whether this run takes every seeded test's full count of seeds.
  public static var isFullRun: Bool {
    ProcessInfo.processInfo.environment[environmentVariable] == "full"
  }

  /// The seeds `0..<full` in a full run, `0..<everyRun` otherwise.
  /// - Parameters:
  ///   - everyRun: How many seeds every run takes (at most `full`).
  ///   - full: How many seeds a full run takes.
  /// - Returns: The range of seeds this run takes.
  public static func first<Seed: FixedWidthInteger>(_ everyRun: Seed, of full: Seed) -> Range<Seed> {
    precondition(0 < everyRun && everyRun <= full, "every run takes 1 to \(full) seeds, not \(everyRun)")
    return 0..<(isFullRun ? full : everyRun)
  }
}
