import EventProtocol
import SampleApps
import Testing
import UpdateMachineTesting

@testable import UpdateMachine

@Suite("UpdateMachine core: catch-up polls ask for more while they come back full")
struct UpdateMachineCoreCatchUpTests {
  /// `count` notes after `lastEventID`.
  func notes(_ count: Int, after lastEventID: Int) -> [EventEnvelope<NoteEvent>] {
    (1...count).map { note(lastEventID + $0, "n\(lastEventID + $0)") }
  }

  @Test("each full poll doubles the next one's limit up to catchUpBatchLimit; one not full goes back")
  func growsWhileFull() {
    var harness = CoreHarness {
      $0.pollBatchLimit = 2
      $0.catchUpBatchLimit = 7
    }
    harness.startLive()
    #expect(harness.core.pollBatchLimit == 2)
    var lastEventID = -1
    var request: UInt64 = 2
    // Full polls: 2, then 4, then 7 (the ceiling), then 7 again.
    for (asked, next) in [(2, 4), (4, 7), (7, 7), (7, 7)] {
      _ = harness.core.pollSucceeded(UpdateMachineTests.request(request), notes(asked, after: lastEventID), now: t0)
      lastEventID += asked
      request += 1
      #expect(harness.core.pollBatchLimit == next)
    }
    // A poll that is not full: back to the first size.
    _ = harness.core.pollSucceeded(UpdateMachineTests.request(request), notes(3, after: lastEventID), now: t0)
    #expect(harness.core.pollBatchLimit == 2)
    let applied = harness.core.confirmedState?.notes.count
    #expect(applied == 23)
  }

  @Test("a failed poll and a new registration go back to the first size; nil asks for everything")
  func resets() {
    var harness = CoreHarness { $0.pollBatchLimit = 2 }
    harness.startLive()
    _ = harness.core.pollSucceeded(request(2), notes(2, after: -1), now: t0)
    #expect(harness.core.pollBatchLimit == 4)
    _ = harness.core.pollFailed(request(3), .timedOut, now: t0)
    #expect(harness.core.pollBatchLimit == 2)

    var registered = CoreHarness { $0.pollBatchLimit = 2 }
    registered.startLive()
    _ = registered.core.pollSucceeded(request(2), notes(2, after: -1), now: t0)
    _ = registered.core.pollFailed(request(3), .api(.badEventQueueID(queueA)), now: t0)
    _ = registered.core.pollSucceeded(request(4), notes(2, after: 1), now: t0)
    _ = registered.core.registerSucceeded(request(4), registration(queueB, lastEventID: 9, notes: []), now: t0)
    #expect(registered.core.pollBatchLimit == 2)

    var unlimited = CoreHarness { $0.pollBatchLimit = nil }
    unlimited.startLive()
    _ = unlimited.core.pollSucceeded(request(2), notes(5, after: -1), now: t0)
    #expect(unlimited.core.pollBatchLimit == nil)
  }

  @Test("a catch-up limit under the first poll's is refused")
  func validation() {
    var configuration = UpdateMachineConfiguration()
    configuration.pollBatchLimit = 100
    configuration.catchUpBatchLimit = 50
    #expect(configuration.problems.contains("catchUpBatchLimit must be at least pollBatchLimit"))
    configuration.catchUpBatchLimit = 100
    #expect(configuration.problems.isEmpty)
  }
}
