/// A hash index from keys to slots that stores no keys: each bucket holds a slot and 32 bits of its key's
/// hash (8 bytes), and the key itself is read from the slot's record when a lookup needs to compare it.
///
/// ``QueueStore`` finds a queue by id, and a user's queues by user, through two of these. A `Dictionary`
/// keyed by the id string would hold the key again (16 bytes) beside the slot, and at 100,000 entries sits
/// at under 40 % load (it doubles at 75 %): about 63 bytes per queue for the ids, 105 for the users. These
/// keep at most 80 % load by linear probing, remove by shifting the following buckets back (no tombstones),
/// and need no rehashing of the keys to grow or remove.
///
/// ```swift
/// var index = SlotIndex()
/// index.insert(slot: 3, hash: "q1".hashValue)
/// index.find(hash: "q1".hashValue) { slot in ids[slot] == "q1" }   // 3
/// ```
struct SlotIndex: Sendable {
  private struct Bucket: Sendable {
    /// The low 32 bits of the key's hash.
    var hash: UInt32
    /// The slot plus one; 0 for an empty bucket.
    var slotPlusOne: UInt32

    static let empty = Bucket(hash: 0, slotPlusOne: 0)
  }

  private var buckets = [Bucket](repeating: .empty, count: 8)
  /// How many slots the index holds.
  private(set) var count = 0

  private var mask: Int { buckets.count - 1 }

  /// The slot whose key has hash `hash` and satisfies `isKey`, if any.
  func find(hash: Int, where isKey: (Int) -> Bool) -> Int? {
    let fragment = UInt32(truncatingIfNeeded: hash)
    var index = Int(fragment) & mask
    while true {
      let bucket = buckets[index]
      if bucket.slotPlusOne == 0 { return nil }
      if bucket.hash == fragment, isKey(Int(bucket.slotPlusOne) - 1) { return Int(bucket.slotPlusOne) - 1 }
      index = (index + 1) & mask
    }
  }

  /// Adds `slot` under its key's hash (the key must not be in the index already).
  mutating func insert(slot: Int, hash: Int) {
    precondition(slot >= 0 && slot < Int(UInt32.max), "slot \(slot) out of the index's range")
    if (count + 1) * 5 > buckets.count * 4 { grow() }
    place(Bucket(hash: UInt32(truncatingIfNeeded: hash), slotPlusOne: UInt32(slot + 1)))
    count += 1
  }

  /// Removes `slot`, indexed under its key's hash; nothing when it is not there.
  mutating func remove(slot: Int, hash: Int) {
    guard var hole = position(of: slot, hash: hash) else { return }
    // Backward shift: move each following bucket of the run into the hole when its home allows it.
    var next = (hole + 1) & mask
    while buckets[next].slotPlusOne != 0 {
      let home = Int(buckets[next].hash) & mask
      if (next - home) & mask >= (next - hole) & mask {
        buckets[hole] = buckets[next]
        hole = next
      }
      next = (next + 1) & mask
    }
    buckets[hole] = .empty
    count -= 1
  }

  /// Puts `newSlot` where `slot` is indexed, for a key that stays the same (its hash is `hash`).
  mutating func replace(slot: Int, with newSlot: Int, hash: Int) {
    guard let index = position(of: slot, hash: hash) else { preconditionFailure("slot \(slot) is not indexed") }
    buckets[index].slotPlusOne = UInt32(newSlot + 1)
  }

  private func position(of slot: Int, hash: Int) -> Int? {
    let target = UInt32(slot + 1)
    var index = Int(UInt32(truncatingIfNeeded: hash)) & mask
    while buckets[index].slotPlusOne != 0 {
      if buckets[index].slotPlusOne == target { return index }
      index = (index + 1) & mask
    }
    return nil
  }

  private mutating func place(_ bucket: Bucket) {
    var index = Int(bucket.hash) & mask
    while buckets[index].slotPlusOne != 0 { index = (index + 1) & mask }
    buckets[index] = bucket
  }

  private mutating func grow() {
    let old = buckets
    buckets = [Bucket](repeating: .empty, count: old.count * 2)
    for bucket in old where bucket.slotPlusOne != 0 { place(bucket) }
  }
}
