import EventProtocol
import EventServer
import Foundation
import HTTPTypes
import Hummingbird
import PartitionHosting
import PostgresServerLog

/// The admin listener of a node of a partitioned cluster (``PartitionedEventHTTPServer``), with the routes a
/// single server's has (on 127.0.0.1 by default, separate from the API):
///
/// - `GET /healthz`: 200 while the process serves;
/// - `GET /readyz`: 200 while its lease session is held; 503 from the start of its shutdown (SIGTERM) until
///   its listeners close, and while its lease session is lost (it serves nothing until its next look);
/// - `GET /metrics`: every ``ServerMetrics`` series, the parked polls and queues summed over the partitions
///   it serves, and per partition whether it serves it, its node's turns and lag.
struct PartitionAdminRoutes<Stored: StoredApplication>: Sendable {
  let host: PartitionHost<StoredRelay<Stored>, ContinuousClock>
  let partitionCount: Int
  let metrics: ServerMetrics

  func add<Context: RequestContext>(to router: Router<Context>) {
    router.get("healthz") { _, _ in Self.text(.ok, "ok\n") }
    router.get("readyz") { _, _ in
      switch await host.readiness {
      case .ready: Self.text(.ok, "ready\n")
      case .stopping: Self.text(.serviceUnavailable, "shutting down\n")
      case .leasesLost: Self.text(.serviceUnavailable, "the partition lease session was lost; opening a new one\n")
      }
    }
    router.get("metrics") { _, _ in
      let nodes = await host.nodesServed
      var parkedPolls = 0
      var queues = 0
      var samples: [ServerMetrics.PartitionSample] = []
      for partition in 0..<partitionCount {
        guard let node = nodes[partition] else {
          samples.append(.init(partition: partition, served: false))
          continue
        }
        parkedPolls += await node.parkedPollCount
        queues += await node.queueCount
        samples.append(
          .init(
            partition: partition,
            served: true,
            turns: await node.turnsStarted,
            lag: await node.replicationLag ?? .init(records: 0, behindFor: .zero)
          )
        )
      }
      metrics.sample(parkedPolls: parkedPolls, queues: queues)
      metrics.sample(partitions: samples)
      var response = Self.text(.ok, metrics.text())
      response.headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
      return response
    }
  }

  private static func text(_ status: HTTPResponse.Status, _ text: String) -> Response {
    .plainText(status, text)
  }
}
