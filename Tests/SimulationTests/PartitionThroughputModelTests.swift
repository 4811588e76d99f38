import Testing

@testable import Simulation

@Suite("The partition throughput model: what nodes on a partitioned log can write, in virtual time")
struct PartitionThroughputModelTests {
  /// Costs where the nodes are the bound: no database cost, a short flush.
  let nodeBound = PartitionThroughputModel.Costs(
    nodePerTurn: 100,
    nodePerWrite: 50,
    databasePerTurn: 0,
    databasePerWrite: 0,
    commitLatency: 1_000,
    roundTrip: 200
  )

  @Test("one node's cores bound the writes: busy throughout, writes per second as its CPU allows")
  func oneNodeIsCPUBound() {
    let result = PartitionThroughputModel(
      nodes: 1,
      coresPerNode: 2,
      partitions: 4,
      writers: 400,
      databaseCores: 4,
      costs: nodeBound
    ).run(for: .seconds(2))
    #expect(result.nodeUtilisation > 0.9)
    // Each write costs 50 µs plus its share of a turn's 100 µs: two cores do a little under 40,000/s (turns
    // of different sizes make the average share a little larger than 100 µs over the average batch).
    let bound = 2 * 1e6 / (50 + 100 / result.writesPerTurn)
    #expect(result.writesPerSecond <= bound * 1.01 && result.writesPerSecond >= bound * 0.85, "\(result), \(bound)")
  }

  @Test("with a database to spare, writes grow with the nodes: 4 nodes write at least 3 times one")
  func nodesAddWrites() {
    func writes(_ nodes: Int) -> Double {
      PartitionThroughputModel(
        nodes: nodes,
        coresPerNode: 2,
        partitions: 16,
        writers: 200 * nodes,
        databaseCores: 64,
        costs: nodeBound
      ).run(for: .seconds(2)).writesPerSecond
    }
    let one = writes(1)
    #expect(writes(2) >= 1.8 * one)
    #expect(writes(4) >= 3 * one)
  }

  /// A partition decides in turns, one at a time, on one core of its node (a node's `EventServer` for the
  /// partition is one actor): four partitions on four nodes of two cores leave half the cores idle.
  @Test("a partition's turns use one core: fewer partitions than cores leave cores idle")
  func partitionsBoundWrites() {
    let fewer = PartitionThroughputModel(
      nodes: 4,
      coresPerNode: 2,
      partitions: 4,
      writers: 800,
      databaseCores: 64,
      costs: nodeBound
    ).run(for: .seconds(2))
    #expect(fewer.nodeUtilisation < 0.55)
  }

  @Test("once the database's cores are the bound, more nodes add nothing")
  func databaseBound() {
    var costs = nodeBound
    costs.databasePerWrite = 200
    func run(_ nodes: Int) -> PartitionThroughputModel.Result {
      PartitionThroughputModel(
        nodes: nodes,
        coresPerNode: 2,
        partitions: 16,
        writers: 200 * nodes,
        databaseCores: 2,
        costs: costs
      ).run(for: .seconds(2))
    }
    let (two, four) = (run(2), run(4))
    #expect(four.databaseUtilisation > 0.95)
    #expect(four.writesPerSecond <= 1.05 * two.writesPerSecond)
    // Two database cores at 200 µs a write: 10,000 writes/s at most.
    #expect(four.writesPerSecond <= 10_000 * 1.01)
  }
}
