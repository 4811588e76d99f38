import EventProtocol

/// What several nodes on a partitioned log can write, in virtual time: the model behind the projection in
/// `docs/scaling.md`, run where this machine's two cores cannot show it.
///
/// Each partition decides in turns, one at a time: a turn takes every write that waited for it, costs its
/// node CPU (``Costs/nodePerTurn`` plus ``Costs/nodePerWrite`` per write) on one of its node's cores, then the
/// database's CPU (``Costs/databasePerTurn`` plus ``Costs/databasePerWrite``) on one of the database's
/// cores, then waits ``Costs/commitLatency`` (the WAL flush: time, not CPU; flushes of different partitions
/// overlap); then its writers hear the answer after ``Costs/roundTrip`` and write again (closed loop: each
/// writer has one write in flight). Cores are taken first come, first served. Partitions are spread evenly
/// over the nodes, writers evenly over the partitions; nothing else runs. What the model leaves out: the
/// network's own limits, locks inside the database other than the partition's row, the disk's flush rate
/// (a flush per turn per partition is assumed to overlap with every other), and deliveries across
/// partitions (their inbox rows cost the database like writes).
///
/// ```swift
/// let result = PartitionThroughputModel(nodes: 4, coresPerNode: 2, partitions: 16, writers: 512,
///                                       databaseCores: 8, costs: .measured).run(for: .seconds(2))
/// print(result.writesPerSecond)
/// ```
public struct PartitionThroughputModel: Sendable {
  /// What each step costs, in microseconds.
  public struct Costs: Sendable, Hashable {
    /// Node CPU per turn, whatever its batch.
    public var nodePerTurn: Double
    /// Node CPU per write in a turn.
    public var nodePerWrite: Double
    /// Database CPU per turn (its transaction, its counter row).
    public var databasePerTurn: Double
    /// Database CPU per write (its row, its index entries).
    public var databasePerWrite: Double
    /// The commit's wait for the WAL flush (overlaps with other partitions').
    public var commitLatency: Double
    /// From a turn's commit to the writer's next write arriving (network both ways).
    public var roundTrip: Double

    /// Costs from their parts, in microseconds.
    public init(
      nodePerTurn: Double,
      nodePerWrite: Double,
      databasePerTurn: Double,
      databasePerWrite: Double,
      commitLatency: Double,
      roundTrip: Double
    ) {
      self.nodePerTurn = nodePerTurn
      self.nodePerWrite = nodePerWrite
      self.databasePerTurn = databasePerTurn
      self.databasePerWrite = databasePerWrite
      self.commitLatency = commitLatency
      self.roundTrip = roundTrip
    }
  }

  /// What a run measured.
  public struct Result: Sendable, Hashable {
    /// Writes committed per second of virtual time.
    public var writesPerSecond: Double
    /// The share of the nodes' cores that was busy.
    public var nodeUtilisation: Double
    /// The share of the database's cores that was busy.
    public var databaseUtilisation: Double
    /// Writes per turn, on average.
    public var writesPerTurn: Double
  }

  /// Nodes, each on its own machine.
  public var nodes: Int
  /// Cores of each node.
  public var coresPerNode: Int
  /// Partitions of the log.
  public var partitions: Int
  /// Writers, each with one write in flight.
  public var writers: Int
  /// Cores of the database.
  public var databaseCores: Int
  /// What each step costs.
  public var costs: Costs

  /// A model of `nodes` nodes (each with `coresPerNode` cores) on `partitions` partitions, `writers`
  /// writers, and a database of `databaseCores` cores.
  public init(nodes: Int, coresPerNode: Int, partitions: Int, writers: Int, databaseCores: Int, costs: Costs) {
    self.nodes = max(nodes, 1)
    self.coresPerNode = max(coresPerNode, 1)
    self.partitions = max(partitions, 1)
    self.writers = max(writers, 1)
    self.databaseCores = max(databaseCores, 1)
    self.costs = costs
  }

  private enum Step {
    case arrive(writer: Int)
    case nodeDone(partition: Int)
    case databaseDone(partition: Int)
    case committed(partition: Int)
  }

  /// Cores taken first come, first served: each core's next free time.
  private struct Cores {
    var freeAt: [Double]
    var busy: Double = 0

    init(count: Int) { freeAt = Array(repeating: 0, count: count) }

    /// Runs `cost` on the first free core from `now`; returns when it ends.
    mutating func run(_ cost: Double, from now: Double) -> Double {
      let core = freeAt.indices.min { freeAt[$0] < freeAt[$1] }!
      let end = max(now, freeAt[core]) + cost
      freeAt[core] = end
      busy += cost
      return end
    }
  }

  /// Runs the model for `duration` of virtual time (after a warm-up of a tenth of it).
  public func run(for duration: Duration) -> Result {
    let total = Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
    let warmUp = total / 10
    let origin = Timestamp(secondsSinceEpoch: 0)
    func at(_ microseconds: Double) -> Timestamp { origin.advanced(by: .microseconds(Int64(microseconds.rounded()))) }
    func time(_ timestamp: Timestamp) -> Double {
      let since = timestamp.sinceEpoch.components
      return Double(since.seconds) * 1e6 + Double(since.attoseconds) / 1e12
    }

    var steps = DeadlineHeap<Step>()
    var nodeCores = (0..<nodes).map { _ in Cores(count: coresPerNode) }
    var databaseCores = Cores(count: self.databaseCores)
    var waiting = Array(repeating: [Int](), count: partitions)
    var inTurn = Array(repeating: [Int](), count: partitions)
    var committed = 0
    var turns = 0
    for writer in 0..<writers { steps.push(.arrive(writer: writer), at: at(Double(writer % 97))) }

    func startTurn(_ partition: Int, at now: Double) {
      inTurn[partition] = waiting[partition]
      waiting[partition] = []
      let writes = Double(inTurn[partition].count)
      let end = nodeCores[partition % nodes].run(costs.nodePerTurn + costs.nodePerWrite * writes, from: now)
      steps.push(.nodeDone(partition: partition), at: at(end))
    }

    while let (timestamp, step) = steps.pop() {
      let now = time(timestamp)
      if now > total + warmUp { break }
      switch step {
      case .arrive(let writer):
        let partition = writer % partitions
        waiting[partition].append(writer)
        if inTurn[partition].isEmpty { startTurn(partition, at: now) }
      case .nodeDone(let partition):
        let writes = Double(inTurn[partition].count)
        let end = databaseCores.run(costs.databasePerTurn + costs.databasePerWrite * writes, from: now)
        steps.push(.databaseDone(partition: partition), at: at(end))
      case .databaseDone(let partition):
        steps.push(.committed(partition: partition), at: at(now + costs.commitLatency))
      case .committed(let partition):
        if now >= warmUp {
          committed += inTurn[partition].count
          turns += 1
        }
        for writer in inTurn[partition] { steps.push(.arrive(writer: writer), at: at(now + costs.roundTrip)) }
        inTurn[partition] = []
        if !waiting[partition].isEmpty { startTurn(partition, at: now) }
      }
    }
    let seconds = total / 1e6
    let nodeBusy = nodeCores.map(\.busy).reduce(0, +)
    return Result(
      writesPerSecond: Double(committed) / seconds,
      nodeUtilisation: min(1, nodeBusy / ((total + warmUp) * Double(nodes * coresPerNode))),
      databaseUtilisation: min(1, databaseCores.busy / ((total + warmUp) * Double(self.databaseCores))),
      writesPerTurn: turns == 0 ? 0 : Double(committed) / Double(turns)
    )
  }
}
