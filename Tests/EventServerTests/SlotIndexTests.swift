import EventProtocol
import TestScheduling
import Testing

@testable import EventServer

@Suite("SlotIndex: a hash index of slots whose keys live in the records")
struct SlotIndexTests {
  @Test("random inserts, removals and replacements find what a dictionary finds", .cpuBound, arguments: 0..<20)
  func matchesDictionary(seed: UInt64) {
    var random = SeededRandomNumberGenerator(seed: seed)
    // Few distinct hashes (some seeds: one), so runs are long, wrap around the end and collide.
    let hashRange = [1, 3, 50, 1 << 40][Int(seed % 4)]
    var keyOfSlot: [Int: String] = [:]
    var hashOfKey: [String: Int] = [:]
    var model: [String: Int] = [:]
    var index = SlotIndex()
    var nextSlot = 0
    for step in 0..<400 {
      let roll = Int.random(in: 0..<10, using: &random)
      if roll < 5 || model.isEmpty {
        let key = "k\(step)"
        let hash = Int.random(in: 0..<hashRange, using: &random)
        hashOfKey[key] = hash
        keyOfSlot[nextSlot] = key
        model[key] = nextSlot
        index.insert(slot: nextSlot, hash: hash)
        nextSlot += 1
      } else if roll < 8 {
        let key = model.keys.sorted().randomElement(using: &random)!
        index.remove(slot: model[key]!, hash: hashOfKey[key]!)
        model[key] = nil
      } else {
        let key = model.keys.sorted().randomElement(using: &random)!
        keyOfSlot[nextSlot] = key
        index.replace(slot: model[key]!, with: nextSlot, hash: hashOfKey[key]!)
        model[key] = nextSlot
        nextSlot += 1
      }
      #expect(index.count == model.count)
      for (key, hash) in hashOfKey {
        #expect(index.find(hash: hash) { keyOfSlot[$0] == key } == model[key], "seed \(seed) step \(step) \(key)")
      }
    }
  }
}
