import EventProtocol
import Foundation

/// How a node of one partition splits a decision's deliveries: those for its own partition's users it
/// delivers itself; those for other partitions' users it sends to their inboxes, one message per partition
/// (``PartitionedSharedLog``).
struct PartitionRoute: Sendable {
  /// The log's partitions.
  let map: PartitionMap
  /// This node's partition.
  let home: Int
  /// Each user's partition key (``StoredApplication/partitionKey(for:)``).
  let partitionKey: @Sendable (UserID) -> String

  /// `deliveries` split by partition: each delivery's recipients grouped by their partition (a delivery to
  /// users of three partitions becomes three, each with the same event), in the order they came.
  /// - Returns: The deliveries for this partition, and those for each other partition, by partition.
  func split<Event: EventPayload>(
    _ deliveries: [Delivery<Event>]
  ) -> (local: [Delivery<Event>], remote: [Int: [Delivery<Event>]]) {
    var local: [Delivery<Event>] = []
    var remote: [Int: [Delivery<Event>]] = [:]
    for delivery in deliveries {
      var byPartition: [Int: [UserID]] = [:]
      var order: [Int] = []
      for recipient in delivery.recipients {
        let partition = map.partition(ofKey: partitionKey(recipient))
        if byPartition[partition] == nil { order.append(partition) }
        byPartition[partition, default: []].append(recipient)
      }
      for partition in order {
        let part = Delivery(to: byPartition[partition]!, event: delivery.event)
        if partition == home { local.append(part) } else { remote[partition, default: []].append(part) }
      }
    }
    return (local, remote)
  }

  /// Sends the deliveries for other partitions' users to their inboxes in `transaction` (as `author`'s),
  /// and returns those for this partition's users.
  /// - Throws: ``ServerLogError`` when the transaction is not a partition's, or a message cannot be written.
  func send<Event: EventPayload>(
    _ deliveries: [Delivery<Event>],
    author: UserID?,
    in transaction: any DatabaseTransaction
  ) async throws -> [Delivery<Event>] {
    let (local, remote) = split(deliveries)
    guard !remote.isEmpty else { return local }
    guard let partitioned = transaction as? any PartitionedLogTransaction else {
      throw ServerLogError.storage("deliveries for other partitions, in a transaction that is not a partition's")
    }
    for partition in remote.keys.sorted() {
      let message = PartitionMessage(author: author, deliveries: remote[partition]!)
      try await partitioned.send(try JSONEncoder().encode(message), to: partition)
    }
    return local
  }
}

/// What one partition sends another: deliveries for the other's users, and whose command caused them
/// (`nil`: the application's own deadline).
struct PartitionMessage<Event: EventPayload>: Codable, Sendable {
  var author: UserID?
  var deliveries: [Delivery<Event>]
}
