import Foundation
import Simulation

extension Workloads {
  /// N1: what N nodes on a partitioned log of 32 partitions would write, each node on its own machine: the virtual-time
  /// model (``PartitionThroughputModel``) with the costs `durability-bench` measured on this machine
  /// (`docs/scaling.md`, "A projection"). Checks that the model finds four nodes at least three times one
  /// while the database has cores to spare, and prints where the database becomes the bound.
  func partitionProjection() {
    // Measured with `durability-bench --postgres URL` (release, 2 cores, PostgreSQL on the same machine,
    // 2026-11-27, appends without NOTIFY): CPU per write a + b / (writes per turn), fitted by least squares
    // to its seven partitioned runs: 1 partition (64 writes a turn: nodes 39 µs, PostgreSQL 10 µs a write),
    // 4 partitions on 1, 2, 4 nodes (16 a turn: 39–42 µs and 21 µs) and 16 partitions on 1, 2, 4 nodes (4 a
    // turn: 100–117 µs and 75–89 µs). The flush and the round trip are assumptions (a local SSD's fsync, a
    // data centre's network), not measured here.
    let measured = PartitionThroughputModel.Costs(
      nodePerTurn: Self.measuredNodePerTurn,
      nodePerWrite: Self.measuredNodePerWrite,
      databasePerTurn: Self.measuredDatabasePerTurn,
      databasePerWrite: Self.measuredDatabasePerWrite,
      commitLatency: Self.measuredCommitLatency,
      roundTrip: Self.measuredRoundTrip
    )
    let duration: Duration = quick ? .milliseconds(300) : .seconds(2)
    var byNodes: [Int: Double] = [:]
    for databaseCores in [8, 32] {
      for nodes in [1, 2, 4, 8, 16] {
        // The same 4,096 writers whatever the nodes: what grows is where they can be served.
        let result = PartitionThroughputModel(
          nodes: nodes,
          coresPerNode: 2,
          partitions: 32,
          writers: 4_096,
          databaseCores: databaseCores,
          costs: measured
        ).run(for: duration)
        if databaseCores == 32 { byNodes[nodes] = result.writesPerSecond }
        print(
          "N1 writes_per_second_\(nodes)_nodes_db_\(databaseCores)_cores \(Int(result.writesPerSecond)) 1/s "
            + "(nodes \(Int(result.nodeUtilisation * 100)) % busy, database \(Int(result.databaseUtilisation * 100)) % "
            + "busy, \(Int(result.writesPerTurn)) writes per turn)"
        )
      }
    }
    guard let one = byNodes[1], let four = byNodes[4], four >= 3 * one else {
      fail("N1: four nodes do not write three times one with a database to spare: \(byNodes)")
    }
    figures.record("N1", "four_nodes_over_one", four / one, "x (target >= 3)", format: "%.2f")
    // Where the database becomes the bound, at large batches: the nodes' cores over the database's, weighed by
    // what a write costs each.
    let batch = 64.0
    let nodeCost = Self.measuredNodePerWrite + Self.measuredNodePerTurn / batch
    let databaseCost = Self.measuredDatabasePerWrite + Self.measuredDatabasePerTurn / batch
    print(
      "N1 nodes_of_2_cores_per_database_core_at_64_writes_a_turn "
        + "\(String(format: "%.1f", nodeCost / (2 * databaseCost))) (the database is the bound past that)"
    )
  }

  // The measured costs, in microseconds (see `partitionProjection()`).
  static let measuredNodePerTurn = 322.0
  static let measuredNodePerWrite = 24.4
  static let measuredDatabasePerTurn = 312.0
  static let measuredDatabasePerWrite = 2.5
  static let measuredCommitLatency = 500.0
  static let measuredRoundTrip = 200.0
}
