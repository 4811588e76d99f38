import Foundation
import Testing

/// A trait for tests that keep a thread busy computing (property runs over many seeds, simulations): at most
/// one core less than the machine has runs their cases at once (one on a 2-core machine), across the whole
/// test process, so a thread of the cooperative pool stays free for the async tests, whose time limits would
/// otherwise run out while every thread computes.
///
/// On a 2-core machine the pool has two threads. Swift Testing starts every test case at once; before this
/// trait, hundreds of synchronous property cases held both threads while a busy machine ran them at half
/// speed, and an async test waiting on a manual clock or a socket met its one-minute limit without having
/// run. With the trait a waiting case is suspended (it holds no thread), and at most one computes.
///
/// ```swift
/// @Suite("properties", .cpuBound)
/// struct Properties { @Test(arguments: 0..<1_000) func holds(seed: UInt64) { … } }
/// ```
public struct CPUBound: TestTrait, SuiteTrait, TestScoping {
  public var isRecursive: Bool { true }

  public func scopeProvider(for test: Test, testCase: Test.Case?) -> CPUBound? {
    // Each case alone: a whole parameterized test under one turn would still run its cases in parallel.
    testCase == nil ? nil : self
  }

  public func provideScope(
    for test: Test,
    testCase: Test.Case?,
    performing function: @Sendable () async throws -> Void
  ) async throws {
    await CPULane.shared.acquire()
    do {
      try await function()
    } catch {
      await CPULane.shared.release()
      throw error
    }
    await CPULane.shared.release()
  }
}

extension Trait where Self == CPUBound {
  /// Runs each case alone among the CPU-bound tests of the process (``CPUBound``).
  public static var cpuBound: CPUBound { CPUBound() }
}

/// A few turns at a time (one core less than the machine has, at least one), first come first served;
/// waiters are suspended, not blocked.
actor CPULane {
  static let shared = CPULane(turns: max(1, ProcessInfo.processInfo.activeProcessorCount - 1))

  private let turns: Int
  private var running = 0
  private var waiting: [CheckedContinuation<Void, Never>] = []

  init(turns: Int) {
    self.turns = turns
  }

  func acquire() async {
    guard running >= turns else {
      running += 1
      return
    }
    // The releasing case hands its turn over: `running` stays as it is.
    await withCheckedContinuation { waiting.append($0) }
  }

  func release() {
    if waiting.isEmpty {
      running -= 1
    } else {
      waiting.removeFirst().resume()
    }
  }
}
