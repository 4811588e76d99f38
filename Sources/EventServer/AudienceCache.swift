import EventProtocol

/// Recipient lists an application sends to again and again (a channel's members, everyone), each resolved
/// once to the queue slots it reaches and kept while the list and the queues stay the same.
///
/// A delivery to a thousand users otherwise hashes a thousand user ids to find their queues, for every
/// event. An application that keeps the list it sends to (an array it holds and passes again, as a
/// channel's member list is) gets it resolved once: the next event to the same array costs no hash at all.
///
/// **Why the array's address is a safe key.** An entry holds the array it was resolved from, so its buffer
/// stays allocated (no other array can be given the same address while the entry lives) and is shared (a
/// change through any other copy of the array copies it first: Swift's arrays are copy-on-write). An array
/// whose elements start at the same address, with the same count, is therefore this very array, unchanged.
/// An array built afresh for each event is simply not found, and resolved the usual way.
///
/// ``QueueStore`` forgets every list whenever a queue is added or removed: a resolution is never used across
/// such a change.
struct AudienceCache: Sendable {
  /// One resolved list.
  private struct Entry: Sendable {
    /// The list, held so that its buffer cannot be freed or changed (see above).
    let recipients: [UserID]
    /// The slots of every queue of its distinct users, in recipient order, each user's oldest first.
    let slots: [Int]
    /// Whether a delivery found it since it was kept.
    var wasFound = false
    /// When it was kept (a count of ``keep(_:for:)`` calls).
    let keptAt: Int
  }

  /// Lists shorter than this are resolved each time: a few hashes cost less than keeping an entry.
  static let minimumCount = 32
  /// How many lists are kept (a server sends to a few large audiences at a time).
  static let capacity = 8

  private var entries: [Entry] = []
  private var keeps = 0

  /// The slots `recipients` reaches, if it was resolved since the queues last changed.
  mutating func slots(for recipients: [UserID]) -> [Int]? {
    guard recipients.count >= Self.minimumCount else { return nil }
    let address = Self.address(of: recipients)
    for index in entries.indices
    where entries[index].recipients.count == recipients.count
      && Self.address(of: entries[index].recipients) == address
    {
      // Written once: a write on every delivery cost the fan-out a measurable share.
      if !entries[index].wasFound { entries[index].wasFound = true }
      return entries[index].slots
    }
    return nil
  }

  /// Keeps the resolution of `recipients` (lists under ``minimumCount`` are not kept). When full, it takes
  /// the place of the oldest list never found again, or of the oldest list when every list was: an
  /// application that builds a new list for every event churns through the lists never found, and the lists
  /// it keeps and sends to again stay.
  mutating func keep(_ slots: [Int], for recipients: [UserID]) {
    guard recipients.count >= Self.minimumCount else { return }
    keeps += 1
    let entry = Entry(recipients: recipients, slots: slots, keptAt: keeps)
    guard entries.count == Self.capacity else {
      entries.append(entry)
      return
    }
    let victim = entries.indices.min {
      (entries[$0].wasFound ? 1 : 0, entries[$0].keptAt) < (entries[$1].wasFound ? 1 : 0, entries[$1].keptAt)
    }!
    entries[victim] = entry
  }

  /// Forgets every list: the queues changed.
  mutating func removeAll() {
    guard !entries.isEmpty else { return }
    entries.removeAll()
  }

  private static func address(of recipients: [UserID]) -> UnsafeRawPointer? {
    recipients.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
  }
}
