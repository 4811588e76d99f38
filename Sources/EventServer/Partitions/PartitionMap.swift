import EventProtocol

/// How a cluster's users are divided among the partitions of its log: each user belongs to one partition,
/// chosen by a stable hash of the user's partition key (the user's id unless the application chooses one:
/// ``StoredApplication/partitionKey(for:)``).
///
/// A partition holds its users' queues, their clients' mutation memory and the records that decide them;
/// a node owns whole partitions (``PartitionLeasePlan``), so no node does another partition's work. The
/// number of partitions is fixed when the log is created (moving a user to another partition would move
/// their queues): choose it for the most nodes the cluster may ever run, a few partitions per node
/// (`docs/scaling.md`, "Partitions").
///
/// The hash is FNV-1a over the id's UTF-8 bytes, the same on every platform, build and process (Swift's
/// `Hasher` is seeded per process, so two nodes would disagree), so every node and a proxy compute the
/// same partition.
///
/// ```swift
/// let map = PartitionMap(count: 16)!
/// let partition = map.partition(of: "alice")  // the same on every node
/// ```
public struct PartitionMap: Sendable, Hashable {
  /// The most partitions a log can have.
  public static var maximumCount: Int { 1_024 }

  /// How many partitions the log has.
  public let count: Int

  /// A map of `count` partitions, or `nil` unless `count` is in `1...maximumCount`.
  public init?(count: Int) {
    guard (1...Self.maximumCount).contains(count) else { return nil }
    self.count = count
  }

  /// One partition: every user in it (a server that is not partitioned).
  public static var single: PartitionMap { PartitionMap(count: 1)! }

  /// The partition `user` belongs to, in `0..<count`, when users are placed by their own id (the default
  /// ``StoredApplication/partitionKey(for:)``).
  /// - Complexity: O(*n*) in the length of the user's id.
  public func partition(of user: UserID) -> Int {
    partition(ofKey: user.rawValue)
  }

  /// The partition of the users whose partition key is `key` (``StoredApplication/partitionKey(for:)``), in
  /// `0..<count`.
  /// - Complexity: O(*n*) in the length of the key.
  public func partition(ofKey key: String) -> Int {
    guard count > 1 else { return 0 }
    return Int(Self.stableHash(key) % UInt64(count))
  }

  /// FNV-1a (64 bits) of `text`'s UTF-8 bytes.
  static func stableHash(_ text: String) -> UInt64 {
    FNV1a.hash(text.utf8)
  }
}
