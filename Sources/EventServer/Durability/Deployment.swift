import EventProtocol
import Foundation

extension EventServer {
  /// How a server keeps what it decides, fixed when it is made: the one place its deployments differ.
  ///
  /// - ``inMemory``: made by ``EventServer/init(application:configuration:clock:anchor:random:pushGateway:)``.
  ///   Nothing is logged; an answer leaves as soon as the machine decides it.
  /// - ``singleServer(_:)``: made by ``EventServer/recovering(from:application:configuration:clock:anchor:random:pushGateway:snapshots:)``
  ///   (and `serving` for a stored application). Every input goes to the server's own log through the group
  ///   commit, and an answer waits until the records it reveals are durable.
  /// - ``clusterNode(_:_:)``: made by ``EventServer/joining(_:application:configuration:clock:anchor:random:pushGateway:replication:)``.
  ///   The node decides in turns on a log several nodes share, and follows what the others commit.
  ///
  /// A request asks it which path to take; no other part of the server keeps a mode of its own. Whether
  /// the application's state is in the machine or in database tables is the other, independent choice
  /// (``ApplicationStorage``).
  enum Deployment {
    case inMemory
    case singleServer(Durability)
    case clusterNode(Durability, ClusterNode)

    /// The log side a single server and a cluster node share; `nil` in memory.
    var durability: Durability? {
      switch self {
      case .inMemory: nil
      case .singleServer(let durability), .clusterNode(let durability, _): durability
      }
    }

    /// The cluster node's side; `nil` for the other deployments.
    var clusterNode: ClusterNode? {
      if case .clusterNode(_, let node) = self { node } else { nil }
    }
  }

  /// Where the application's state lives, fixed when the server starts serving: in the machine (an
  /// in-memory ``ServerApplication``), or in database tables (a ``StoredApplication``, whose requests take
  /// the driver's steps on any durable deployment).
  enum ApplicationStorage {
    case inMachine
    case inTables(StoredDriver<Application, C>)

    /// The stored application's driver; `nil` for an application in the machine.
    var driver: StoredDriver<Application, C>? {
      if case .inTables(let driver) = self { driver } else { nil }
    }
  }

  /// A durable server's log, its group commit, and what waits for it.
  ///
  /// A class, owned by the actor alone and never handed out: the actor reads and changes it in place dozens
  /// of times per request, and as a struct nested in the generic actor each read copied the whole of it
  /// (retaining every reference it holds) in the server's unspecialised code.
  final class Durability {
    let log: any ServerLog
    var commit: GroupCommit
    /// Encodes a snapshot of the machine at a position (the application is `Codable` for durable servers).
    let encodeSnapshot: @Sendable (Machine, UInt64) throws(ServerLogError) -> Data
    /// The records since the last snapshot, against the schedule that says when the next is due.
    var snapshotDebt: SnapshotDebt
    /// Actions held until the log is durable through their position, oldest first.
    var gated: [(position: UInt64, actions: [Machine.Action])] = []
    var gatedStart = 0
    /// Requests waiting for the log to be durable through their position.
    var waiters: [(position: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
    var failureWaiters: [(id: Int, continuation: CheckedContinuation<ServerLogError?, Never>)] = []
    /// Callers of ``EventServer/waitForAnswersHeld(count:)``, with the count each waits for.
    var heldAnswerWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    /// Callers of ``EventServer/waitUntilAppended(through:)``, with the position each waits for.
    var appendWaiters: [(position: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
    /// Why the last snapshot could not be stored, if it could not.
    var snapshotFailure: ServerLogError?

    init(
      log: any ServerLog,
      commit: GroupCommit,
      encodeSnapshot: @escaping @Sendable (Machine, UInt64) throws(ServerLogError) -> Data,
      snapshotDebt: SnapshotDebt
    ) {
      self.log = log
      self.commit = commit
      self.encodeSnapshot = encodeSnapshot
      self.snapshotDebt = snapshotDebt
    }

    /// How many answers wait for the log.
    var heldAnswers: Int { gated.count - gatedStart }
  }
}
