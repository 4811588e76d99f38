import EventProtocol
import EventServer
import PostgresServerLog

/// A node of a partitioned cluster: it holds leases on some of the log's partitions
/// (``PartitionLeases``) and serves each with a cluster node of its own (`EventServer.joining` on the
/// partition, on connections of its own: ``PostgresServerLog/openPartition(_:connections:)``), loaded from the partition's snapshot and records when
/// the lease is taken.
///
/// ``rebalance()`` is one look at the cluster: it surveys the leases, applies the ``PartitionLeasePlan``
/// (lets the excess go after stopping its nodes, tries free partitions and starts a node for each one it
/// gets), and, when the leases were lost (the session ended or fell silent), stops every node and opens a
/// new session. ``run(every:clock:)`` does it on a timer. A request for a user is served by
/// ``node(for:)``; `nil` means another node holds the user's partition (or nobody yet): forward it.
///
/// A client keeps its queue across a move: the queue lives in the partition's log, which the next holder
/// loads. Leases decide who serves, not what is correct (``PartitionLeases``).
///
/// ```swift
/// let host = try await PartitionHost.open(log: log, rotation: nodeNumber) { partition in
///   try await EventServer.joining(partition, application: app, clock: ContinuousClock()).0
/// }
/// try await host.rebalance()
/// if let node = await host.node(for: "alice") { _ = try await node.register(user: "alice") }
/// ```
public actor PartitionHost<Application: ServerApplication & Codable, C: Clock> where C.Duration == Duration {
  /// The cluster node serving one partition.
  public typealias Node = EventServer<Application, C>
  /// Starts the node of a partition this host just took, on the partition's log.
  public typealias StartNode = @Sendable (PostgresServerLog) async throws -> Node

  /// What one look at the cluster changed.
  public struct Change: Sendable, Hashable {
    /// The partitions taken, whose nodes started.
    public var taken: [Int] = []
    /// The partitions let go, whose nodes stopped first.
    public var released: [Int] = []
    /// The partitions whose leases were lost with the session (their nodes stopped).
    public var lost: [Int] = []

    /// A change from its parts (nothing changed by default).
    public init(taken: [Int] = [], released: [Int] = [], lost: [Int] = []) {
      self.taken = taken
      self.released = released
      self.lost = lost
    }
  }

  /// How long the parts of the last look took (for the node's log: a slow takeover says where it waited).
  public struct LookTimings: Sendable, Hashable {
    /// Reading who holds what (and, after a lost session, opening a new one).
    public var survey: Duration = .zero
    /// Stopping the nodes of partitions let go and releasing their leases.
    public var release: Duration = .zero
    /// Trying the free partitions' leases.
    public var acquire: Duration = .zero
    /// Loading the nodes of the partitions taken (concurrently: the slowest one).
    public var start: Duration = .zero

    /// The whole look.
    public var total: Duration { survey + release + acquire + start }
  }

  /// How long the parts of the last ``rebalance()`` took.
  public private(set) var lastLook = LookTimings()

  private let log: PostgresServerLog
  private var leases: PartitionLeases
  private let startNode: StartNode
  /// Each user's partition key (``StoredApplication/partitionKey(for:)``).
  private let partitionKey: @Sendable (UserID) -> String
  /// Where this node starts looking among free partitions.
  public let rotation: Int
  private var serving: [Int: (view: PostgresServerLog, node: Node)] = [:]
  /// Where this node answers HTTP, and its lean poll listener if any, told to the others with each lease
  /// session.
  private var address: (main: String, polls: String?)?
  /// Where the other nodes' partitions were served at the last look.
  private var elsewhere: [Int: String] = [:]
  /// Where the other nodes' partitions' events routes were served on lean poll listeners at the last look.
  private var elsewherePolls: [Int: String] = [:]
  /// Whether ``shutdown()`` was called: a look under way then stops what it started.
  private var isShutDown = false

  private init(
    log: PostgresServerLog,
    leases: PartitionLeases,
    rotation: Int,
    partitionKey: @escaping @Sendable (UserID) -> String,
    startNode: @escaping StartNode
  ) {
    self.log = log
    self.leases = leases
    self.rotation = rotation
    self.partitionKey = partitionKey
    self.startNode = startNode
  }

  /// Opens a lease session on `log` (partition 0 of a partitioned log, as
  /// ``PostgresServerLog/connect(url:logger:operationTimeout:partitions:)`` returns it). Serves nothing
  /// until the first ``rebalance()``.
  /// - Parameters:
  ///   - rotation: Where this node starts looking among free partitions (its number in the cluster spreads
  ///     nodes apart).
  ///   - partitionKey: Each user's partition key: the stored application's
  ///     ``StoredApplication/partitionKey(for:)`` (by default the user's id).
  ///   - startNode: Starts the node of a partition taken.
  public static func open(
    log: PostgresServerLog,
    rotation: Int,
    partitionKey: @escaping @Sendable (UserID) -> String = { $0.rawValue },
    startNode: @escaping StartNode
  ) async throws(ServerLogError) -> PartitionHost {
    let host = PartitionHost(
      log: log,
      leases: try await PartitionLeases.open(on: log),
      rotation: rotation,
      partitionKey: partitionKey,
      startNode: startNode
    )
    // A node joined: the others let their excess go at once, not at their next look, and this node hears
    // them do so: its LISTEN is in effect before it announces (an answer sent before would be lost, and the
    // partitions let go would wait out this node's next look).
    await log.listeningForLeaseChanges(within: log.operationTimeout)
    await host.announceChange()
    return host
  }

  /// The partition `user`'s queues, writes and registrations are in.
  public func partition(of user: UserID) -> Int {
    log.partitions.partition(ofKey: partitionKey(user))
  }

  /// The partitions this host serves.
  public var partitionsServed: Set<Int> { Set(serving.keys) }

  /// The node of each partition this host serves, by partition.
  public var nodesServed: [Int: Node] { serving.mapValues(\.node) }

  /// Whether the host can serve: what a node's `/readyz` answers.
  public enum Readiness: Sendable, Hashable {
    /// Its lease session is held: it serves its partitions and forwards the others' requests.
    case ready
    /// ``shutdown()`` began: its partitions are being handed over.
    case stopping
    /// Its lease session ended or was given up: it serves nothing until its next look opens a new one.
    case leasesLost
  }

  /// Whether the host can serve now.
  public var readiness: Readiness {
    if isShutDown { return .stopping }
    return leases.lost == nil ? .ready : .leasesLost
  }

  /// The node of the lowest partition served here, if any: any node answers questions about tables that
  /// every partition shares.
  public var anyNode: Node? { serving.min { $0.key < $1.key }?.value.node }

  /// The node serving `user`'s partition here, or `nil` when this host does not hold it.
  public func node(for user: UserID) -> Node? {
    serving[partition(of: user)]?.node
  }

  /// Where a user's requests are served, as this host knows it.
  public enum Placement: Sendable {
    /// Here, by this node.
    case here(Node)
    /// By another node, which answers HTTP at this address (as it said at the last look).
    case elsewhere(address: String)
    /// Nowhere known yet: the partition is free or moving, or its holder did not say where it answers.
    case unknown
  }

  /// Where `user`'s requests are served.
  public func placement(of user: UserID) -> Placement {
    let partition = self.partition(of: user)
    if let node = serving[partition]?.node { return .here(node) }
    if let address = elsewhere[partition] { return .elsewhere(address: address) }
    return .unknown
  }

  /// Where `user`'s polls are served: as ``placement(of:)``, but at the holder's lean poll listener when it
  /// has one (``advertise(_:pollAddress:)``).
  public func pollPlacement(of user: UserID) -> Placement {
    let partition = self.partition(of: user)
    if let node = serving[partition]?.node { return .here(node) }
    if let address = elsewherePolls[partition] ?? elsewhere[partition] { return .elsewhere(address: address) }
    return .unknown
  }

  /// Tells the other nodes, at this look and after any new lease session, that this node answers HTTP at
  /// `address`, and the events route at `pollAddress` too when it has a lean poll listener
  /// (``PartitionLeases/advertise(_:pollAddress:)``).
  /// - Throws: ``ServerLogError/storage(_:)`` when the lease session cannot record it.
  public func advertise(_ address: String, pollAddress: String? = nil) async throws(ServerLogError) {
    self.address = (address, pollAddress)
    try await leases.advertise(address, pollAddress: pollAddress)
  }

  /// One look at the cluster (see the type's discussion).
  /// - Returns: What changed; leases found lost (the session ended or fell silent) stop their nodes and are
  ///   listed in ``Change/lost``, and the next look opens a new session.
  /// - Throws: ``ServerLogError`` when the database cannot be reached or a node cannot start (nothing
  ///   served changes but that partition, whose lease is let go).
  @discardableResult
  public func rebalance() async throws(ServerLogError) -> Change {
    var change = Change()
    guard !isShutDown else { return change }
    let clock = ContinuousClock()
    var mark = clock.now
    /// The time since the last mark, and a new mark.
    func lap() -> Duration {
      let now = clock.now
      defer { mark = now }
      return mark.duration(to: now)
    }
    lastLook = LookTimings()
    if leases.lost != nil {
      change.lost = serving.keys.sorted()
      await stopAll()
      elsewhere = [:]
      elsewherePolls = [:]
      await leases.close()
      leases = try await PartitionLeases.open(on: log)
      if let address { try await leases.advertise(address.main, pollAddress: address.polls) }
      // As at the join: listening (again, after a lost connection) before the others are asked to answer.
      await log.listeningForLeaseChanges(within: log.operationTimeout)
      await leases.announceChange()
    }
    let survey: LeaseSurvey
    do {
      survey = try await leases.survey()
    } catch {
      // The session ended or fell silent: the partitions may be another node's already.
      guard leases.lost != nil else { throw error }
      change.lost += serving.keys.sorted()
      await stopAll()
      elsewhere = [:]
      elsewherePolls = [:]
      return change
    }
    elsewhere = survey.addresses
    elsewherePolls = survey.pollAddresses
    lastLook.survey = lap()
    let plan = PartitionLeasePlan(
      partitions: log.partitions.count,
      liveNodes: survey.liveNodes,
      mine: survey.mine,
      heldByOthers: survey.heldByOthers,
      rotation: rotation
    )
    for partition in plan.release {
      await stop(partition)
      try await leases.release(partition)
      change.released.append(partition)
    }
    // The partitions let go are taken by the others' looks this announcement wakes.
    if !plan.release.isEmpty { await leases.announceChange() }
    lastLook.release = lap()
    var acquired: [Int] = []
    for partition in plan.acquire where try await leases.tryAcquire(partition) { acquired.append(partition) }
    lastLook.acquire = lap()
    // The nodes load their partitions at once (a node taking over a dead one's share starts several).
    var failure: ServerLogError?
    for (partition, started) in await start(acquired) {
      switch started {
      case .success(let served) where isShutDown:
        // Shut down while the node loaded: it stops at once, and the lease goes with the session.
        await Self.stop(served, within: log.operationTimeout, at: log.location)
      case .success(let served):
        serving[partition] = served
        change.taken.append(partition)
      case .failure(let error):
        try? await leases.release(partition)
        failure = failure ?? error
      }
    }
    lastLook.start = lap()
    if let failure { throw failure }
    return change
  }

  /// Starts the nodes of `partitions` concurrently; answers each one's node (with its log view) or why it
  /// could not start, in partition order.
  private func start(
    _ partitions: [Int]
  ) async -> [(Int, Result<(view: PostgresServerLog, node: Node), ServerLogError>)] {
    let log = log
    let startNode = startNode
    return await withTaskGroup(of: (Int, Result<(view: PostgresServerLog, node: Node), ServerLogError>).self) {
      group in
      for partition in partitions {
        group.addTask {
          let view: PostgresServerLog
          do {
            view = try log.openPartition(partition)
          } catch let error as ServerLogError {
            return (partition, .failure(error))
          } catch {
            return (partition, .failure(.storage("partition \(partition): \(error)")))
          }
          do {
            // Bounded like every database operation: a node that cannot load its partition in time is given
            // up (its connections closed) and the lease let go.
            let node = try await PostgresServerLog.withDeadline(view.operationTimeout * 4, at: view.location) {
              try await startNode(view)
            }
            return (partition, .success((view, node)))
          } catch {
            await view.close()
            return (
              partition,
              .failure(
                (error as? ServerLogError) ?? .storage("partition \(partition)'s node could not start: \(error)")
              )
            )
          }
        }
      }
      var started: [(Int, Result<(view: PostgresServerLog, node: Node), ServerLogError>)] = []
      for await result in group { started.append(result) }
      return started.sorted { $0.0 < $1.0 }
    }
  }

  /// Looks at the cluster every `interval` until the task is cancelled; a look that fails is tried again at
  /// the next one.
  public func run<Timer: Clock>(every interval: Duration, clock: Timer) async where Timer.Duration == Duration {
    while !Task.isCancelled {
      let mark = leaseChangesHeard
      _ = try? await rebalance()
      await waitForNextLook(after: interval, clock: clock, changesHeard: mark)
    }
  }

  /// How many lease changes this node has heard announced: taken before a look, and handed to
  /// ``waitForNextLook(after:clock:changesHeard:)`` after it, so an announcement heard during the look is
  /// not missed.
  public nonisolated var leaseChangesHeard: UInt64 { log.leaseChangesHeard }

  /// Suspends until the next look is due: `interval` on `clock`, or sooner, when a node has announced, since
  /// `changesHeard` was read, that it let leases go or joined (``PartitionLeases/announceChange()``),
  /// or the task is cancelled.
  public func waitForNextLook<Timer: Clock>(
    after interval: Duration,
    clock: Timer,
    changesHeard: UInt64
  ) async where Timer.Duration == Duration {
    let log = log
    await withTaskGroup(of: Void.self) { group in
      group.addTask { try? await clock.sleep(for: interval) }
      group.addTask { await log.waitForLeaseChange(after: changesHeard) }
      await group.next()
      group.cancelAll()
    }
  }

  /// Stops every node (their acknowledgements recorded) and lets every lease go. Runs at once, even while a
  /// look is under way (which then stops what it started): a node stopping hands its partitions over without
  /// waiting for its look to end.
  /// - Returns: How long stopping the nodes took, and then closing the lease session.
  @discardableResult
  public func shutdown() async -> (stoppingNodes: Duration, closingLeases: Duration) {
    isShutDown = true
    let clock = ContinuousClock()
    let began = clock.now
    await stopAll()
    let stopped = clock.now
    // Every partition let go and this node no longer counted, before the others are told to look; the
    // session's end would release them too, but the database may learn of it after their look.
    try? await leases.releaseAll()
    await leases.announceChange()
    await leases.close()
    return (began.duration(to: stopped), stopped.duration(to: clock.now))
  }

  /// Tells the other nodes to look now, on this node's lease session (``PartitionLeases/announceChange()``).
  private func announceChange() async {
    await leases.announceChange()
  }

  private func stop(_ partition: Int) async {
    guard let served = serving.removeValue(forKey: partition) else { return }
    await Self.stop(served, within: log.operationTimeout, at: log.location)
  }

  private func stopAll() async {
    let stopping = serving.values
    serving = [:]
    let (timeout, location) = (log.operationTimeout, log.location)
    await withTaskGroup(of: Void.self) { group in
      for served in stopping { group.addTask { await Self.stop(served, within: timeout, at: location) } }
    }
  }

  /// Stops a partition's node: its parked polls answered, its last writes made, its log view closed; given
  /// up on after twice `timeout`. A node whose database went away may never finish its last write, and a
  /// host waiting for it would serve nothing again after the database came back. Giving up is safe: the partition is no longer served here, and a write of this node that lands late is
  /// still ordered under the partition's counter row, after what others committed.
  private static func stop(
    _ served: (view: PostgresServerLog, node: Node),
    within timeout: Duration,
    at location: String
  ) async {
    _ = try? await PostgresServerLog.withDeadline(timeout * 2, at: location) {
      await served.node.shutdown()
      await served.node.waitForWrites()
      await served.view.close()
    }
  }
}
