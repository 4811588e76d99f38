import EventProtocol
import Testing

@testable import EventServer

@Suite("Partition map: users to partitions by a stable hash")
struct PartitionMapTests {
  @Test("the hash is FNV-1a, fixed across processes and builds (reference values)")
  func referenceValues() {
    // FNV-1a 64 reference vectors (the empty string is the offset basis).
    #expect(PartitionMap.stableHash("") == 0xcbf2_9ce4_8422_2325)
    #expect(PartitionMap.stableHash("a") == 0xaf63_dc4c_8601_ec8c)
    #expect(PartitionMap.stableHash("foobar") == 0x8594_4171_f739_67e8)
    let map = PartitionMap(count: 16)!
    #expect(map.partition(of: "a") == Int(UInt64(0xaf63_dc4c_8601_ec8c) % 16))
  }

  @Test("counts outside 1…1,024 are refused; one partition holds everyone")
  func counts() {
    #expect(PartitionMap(count: 0) == nil)
    #expect(PartitionMap(count: -3) == nil)
    #expect(PartitionMap(count: PartitionMap.maximumCount + 1) == nil)
    #expect(PartitionMap(count: PartitionMap.maximumCount)?.count == PartitionMap.maximumCount)
    #expect(PartitionMap.single.partition(of: "anyone") == 0)
  }

  @Test("10,000 users spread over 16 partitions within a fifth of the mean each")
  func spread() {
    let map = PartitionMap(count: 16)!
    var sizes = [Int](repeating: 0, count: 16)
    for index in 0..<10_000 { sizes[map.partition(of: UserID("user-\(index)"))] += 1 }
    let mean = 10_000 / 16
    #expect(sizes.allSatisfy { abs($0 - mean) * 5 <= mean }, "\(sizes)")
  }
}

@Suite("Partition leases: how partitions spread over the live nodes")
struct PartitionLeasePlanTests {
  @Test("a node below its share tries free partitions from its rotation; above it, lets the excess go")
  func plans() {
    #expect(
      PartitionLeasePlan(partitions: 16, liveNodes: 2, mine: [], heldByOthers: Set(0..<8), rotation: 3)
        == PartitionLeasePlan.expected(acquire: [8, 9, 10, 11, 12, 13, 14, 15], release: [])
    )
    #expect(
      PartitionLeasePlan(partitions: 8, liveNodes: 2, mine: [], heldByOthers: [], rotation: 6)
        == PartitionLeasePlan.expected(acquire: [6, 7, 0, 1], release: [])
    )
    #expect(
      PartitionLeasePlan(partitions: 8, liveNodes: 2, mine: Set(0..<8), heldByOthers: [], rotation: 0)
        == PartitionLeasePlan.expected(acquire: [], release: [4, 5, 6, 7])
    )
    #expect(
      PartitionLeasePlan(partitions: 8, liveNodes: 3, mine: [1, 2, 3], heldByOthers: [0, 4, 5], rotation: 0)
        == PartitionLeasePlan.expected(acquire: [], release: [])
    )
    #expect(PartitionLeasePlan.fairShare(partitions: 16, liveNodes: 3) == 6)
    #expect(PartitionLeasePlan.fairShare(partitions: 16, liveNodes: 0) == 16)
  }

  /// Nodes joining and dying at random; after each change every live node looks a few times (in random
  /// order, each acquiring what is still free): then every partition is held by exactly one live node and
  /// none holds more than its share.
  @Test("nodes join and die: the leases settle with every partition held once, none above its share", arguments: 0..<20)
  func settles(seed: UInt64) {
    var random = SeededRandomNumberGenerator(seed: seed)
    let partitions = [1, 4, 16, 33][Int(seed % 4)]
    var holder: [Int: Int] = [:]  // partition → node
    var alive: [Int] = [0]
    var nextNode = 1
    for step in 0..<12 {
      if alive.count > 1 && Bool.random(using: &random) {
        let dead = alive.remove(at: Int.random(in: 0..<alive.count, using: &random))
        holder = holder.filter { $0.value != dead }  // its session ended: its leases went with it
      } else {
        alive.append(nextNode)
        nextNode += 1
      }
      for _ in 0..<4 {
        for node in alive.shuffled(using: &random) {
          let mine = Set(holder.filter { $0.value == node }.keys)
          let others = Set(holder.filter { $0.value != node }.keys)
          let plan = PartitionLeasePlan(
            partitions: partitions,
            liveNodes: alive.count,
            mine: mine,
            heldByOthers: others,
            rotation: node
          )
          for partition in plan.release { holder[partition] = nil }
          for partition in plan.acquire where holder[partition] == nil { holder[partition] = node }
        }
      }
      let share = PartitionLeasePlan.fairShare(partitions: partitions, liveNodes: alive.count)
      #expect(Set(holder.keys) == Set(0..<partitions), "seed \(seed) step \(step): \(holder)")
      #expect(Set(holder.values).isSubset(of: Set(alive)), "seed \(seed) step \(step)")
      for node in alive {
        #expect(holder.values.filter { $0 == node }.count <= share, "seed \(seed) step \(step) node \(node)")
      }
    }
  }
}

extension PartitionLeasePlan {
  fileprivate static func expected(acquire: [Int], release: [Int]) -> PartitionLeasePlan {
    var plan = PartitionLeasePlan(partitions: 0, liveNodes: 1, mine: [], heldByOthers: [], rotation: 0)
    plan.acquire = acquire
    plan.release = release
    return plan
  }
}
