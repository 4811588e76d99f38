/// A run of stored events a queue holds: the queue's ids `id ..< id + count` for the stored entries
/// `entry ..< entry + count`, all caused by the same author.
///
/// A queue that takes the events the server stores one after another (a broadcast to everyone, a busy
/// conversation) holds one run for all of them, so a delivery costs it a counter, not a reference per event.
struct HeldRun: Sendable, Equatable {
  /// The queue's id for the run's first event.
  var id: Int
  /// The first event's entry in ``SharedEvents``.
  var entry: Int32
  /// How many events the run holds (at least one).
  var count: Int32

  /// The id after the run's last.
  var endID: Int { id + Int(count) }
  /// The entry after the run's last.
  var endEntry: Int { Int(entry) + Int(count) }
}

/// A queue's references to its pending stored events, in increasing id order, as runs (``HeldRun``).
///
/// Acknowledged runs are dropped by moving a head index, as ``EventBacklog`` does: draining a backlog of
/// *n* events in polls of *k* costs O(*n*) in all, and the dead prefix is compacted away once it is as long
/// as what is left.
struct HeldRuns: Sendable {
  private var runs: [HeldRun] = []
  /// The index in ``runs`` of the first run not yet acknowledged, in 32 bits (with ``count`` beside it the
  /// backlog takes 16 bytes of a queue's slot).
  private var head: Int32 = 0
  /// How many events the runs hold, in all.
  private var eventCount: Int32 = 0

  /// An empty backlog.
  init() {}

  /// How many events are held.
  /// - Complexity: O(1).
  var count: Int { Int(eventCount) }

  /// Whether no event is held.
  var isEmpty: Bool { eventCount == 0 }

  /// The runs held, oldest first.
  /// - Complexity: O(1).
  var live: ArraySlice<HeldRun> { runs[Int(head)...] }

  /// The last run, if any.
  var last: HeldRun? { head == runs.count ? nil : runs.last }

  /// Appends event `entry` under id `id` (above every id held), extending the last run when the event
  /// follows it in both ids and entries and `joinsPrevious` (the event has the same author as the entry
  /// before it).
  /// - Complexity: Amortised O(1).
  mutating func append(id: Int, entry: Int, joinsPrevious: Bool) {
    eventCount += 1
    if joinsPrevious, Int(head) < runs.count {
      let last = runs.count - 1
      if runs[last].endID == id, runs[last].endEntry == entry {
        runs[last].count += 1
        return
      }
    }
    runs.append(HeldRun(id: id, entry: Int32(entry), count: 1))
  }

  /// Drops every event with an id up to `lastEventID`, handing each dropped run (or the dropped front of a
  /// run) to `dropped` first.
  /// - Complexity: O(log *n*) in the runs to find them, plus amortised O(1) per run dropped.
  mutating func removeThrough(_ lastEventID: Int, dropped: (HeldRun) -> Void) {
    var low = Int(head)
    var high = runs.count
    // The first run not wholly acknowledged.
    while low < high {
      let middle = (low + high) / 2
      if runs[middle].endID - 1 <= lastEventID { low = middle + 1 } else { high = middle }
    }
    for index in Int(head)..<low {
      dropped(runs[index])
      eventCount -= runs[index].count
    }
    if low < runs.count, runs[low].id <= lastEventID {
      // Acknowledged up to the middle of a run: its front goes.
      let taken = Int32(lastEventID - runs[low].id + 1)
      dropped(HeldRun(id: runs[low].id, entry: runs[low].entry, count: taken))
      runs[low].id += Int(taken)
      runs[low].entry += taken
      runs[low].count -= taken
      eventCount -= taken
    }
    head = Int32(low)
    if low == runs.count {
      runs.removeAll(keepingCapacity: runs.count <= 1_024)
      head = 0
    } else if low * 2 >= runs.count {
      runs.removeSubrange(..<low)
      head = 0
    }
  }
}
