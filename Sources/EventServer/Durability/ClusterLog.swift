/// A log several nodes share, as the kind it is: what a cluster node may do with it follows from the case,
/// read once when the node joins (``SharedServerLog/clusterLog``), never from a cast at each use.
public enum ClusterLog: Sendable {
  /// A log of records only: the node's inputs are all in its machine.
  case records(any SharedServerLog)
  /// A log whose turns are database transactions a stored application's inputs run in.
  case transactional(any TransactionalSharedLog)
  /// One partition of a partitioned log: transactional, with an inbox other partitions write to.
  case partition(any PartitionedSharedLog)

  /// The log itself.
  public var shared: any SharedServerLog {
    switch self {
    case .records(let log): log
    case .transactional(let log): log
    case .partition(let log): log
    }
  }

  /// The log, when its turns are transactions (``transactional(_:)`` and ``partition(_:)``).
  public var transactional: (any TransactionalSharedLog)? {
    switch self {
    case .records: nil
    case .transactional(let log): log
    case .partition(let log): log
    }
  }

  /// The log, when it is one partition of several.
  public var partition: (any PartitionedSharedLog)? {
    if case .partition(let log) = self { log } else { nil }
  }
}

extension SharedServerLog {
  /// This log as a ``ClusterLog`` of records only.
  public var clusterLog: ClusterLog { .records(self) }
}

extension TransactionalSharedLog {
  /// This log as a transactional ``ClusterLog``.
  public var clusterLog: ClusterLog { .transactional(self) }
}

extension PartitionedSharedLog {
  /// This log as one partition's ``ClusterLog``.
  public var clusterLog: ClusterLog { .partition(self) }
}
