import CoreMetrics
import EventServer
import Foundation
import Prometheus
import Synchronization

/// What an ``EventHTTPServer`` measures, through `swift-metrics`, into a Prometheus registry that the
/// admin listener's `GET /metrics` exposes in the text format (`docs/deploying.md` lists every series).
///
/// The server records through the metrics API with this factory (not the process-wide `MetricsSystem`),
/// so several servers in one process, and tests, keep separate registries.
///
/// ```swift
/// var configuration = EventHTTPServerConfiguration(keys: keys)
/// configuration.adminPort = 9090          // /metrics, /healthz, /readyz on 127.0.0.1:9090
/// ```
public final class ServerMetrics: Sendable {
  /// The registry the series live in (emit it with `emitToString()`).
  public let registry: PrometheusCollectorRegistry
  private let factory: PrometheusMetricsFactory

  /// The version of the application served, the `version` label of `event_server_build_info` (the
  /// library's own is its `library` label).
  public let applicationVersion: String

  /// Metrics in a registry of their own, for a server running `applicationVersion` (the library's version
  /// by default: what `event-server` itself reports).
  public init(
    registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
    applicationVersion: String = ServerMetrics.version
  ) {
    self.registry = registry
    self.applicationVersion = applicationVersion
    var factory = PrometheusMetricsFactory(registry: registry)
    factory.defaultDurationHistogramBuckets = [
      .microseconds(100), .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25),
      .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5),
    ]
    self.factory = factory
  }

  /// One series of `event_server_requests_total`.
  private struct RequestSeries: Hashable {
    var route: String
    var status: Int
  }

  /// The request counters made so far, one per series (a fixed set of routes, a few statuses): a counter is
  /// made once, not for every request (its lookup in the registry was a few µs of each short poll).
  private let requestCounters = Mutex<[RequestSeries: CoreMetrics.Counter]>([:])

  /// A request was answered: counted by route (one of the server's, or `other`) and status.
  public func requestAnswered(path: String, status: Int) {
    let series = RequestSeries(route: Self.route(of: path), status: status)
    let counter = requestCounters.withLock { counters in
      if let counter = counters[series] { return counter }
      let counter = Counter(
        label: "event_server_requests_total",
        dimensions: [("route", series.route), ("status", String(status))],
        factory: factory
      )
      counters[series] = counter
      return counter
    }
    counter.increment()
  }

  /// A request was refused with an API error: counted by its code (`RATE_LIMIT_HIT` and `QUOTA_EXCEEDED`
  /// are the two reasons for a `429`; `BAD_REQUEST`, `MUTATION_ID_REUSED`, `UNAUTHORIZED`,
  /// `SERVICE_UNAVAILABLE`…). The codes are the server's own, a fixed set.
  public func refused(code: String) {
    Counter(label: "event_server_refusals_total", dimensions: [("code", code)], factory: factory).increment()
  }

  /// A mutation was answered after `duration` (durable before its answer).
  public func mutationAnswered(after duration: Duration) {
    Timer(label: "event_server_mutation_duration_seconds", factory: factory).recordNanoseconds(
      duration.wholeNanoseconds
    )
  }

  /// A poll delivered `count` events.
  public func eventsDelivered(_ count: Int) {
    guard count > 0 else { return }
    Counter(label: "event_server_events_delivered_total", factory: factory).increment(by: count)
  }

  /// A group of records reached the input log after `duration`.
  public func logAppended(records: Int, after duration: Duration) {
    Timer(label: "event_server_log_append_duration_seconds", factory: factory).recordNanoseconds(
      duration.wholeNanoseconds
    )
    Counter(label: "event_server_log_records_total", factory: factory).increment(by: records)
  }

  /// The state's gauges, sampled when scraped, and the build's (always 1, its version as a label).
  /// - Parameters:
  ///   - parkedPolls: Polls waiting for events.
  ///   - queues: Event queues held.
  ///   - replicationLag: A cluster node's lag behind the shared log; `nil` for a single server (no series).
  ///   - logRejoins: How many times a cluster node rebuilt itself from the log.
  public func sample(parkedPolls: Int, queues: Int, replicationLag: ReplicationLag? = nil, logRejoins: Int = 0) {
    Gauge(label: "event_server_parked_polls", factory: factory).record(parkedPolls)
    Gauge(label: "event_server_queues", factory: factory).record(queues)
    if let replicationLag {
      Gauge(label: "event_server_replication_lag_records", factory: factory).record(Int(replicationLag.records))
      Gauge(label: "event_server_replication_lag_seconds", factory: factory).record(
        Double(replicationLag.behindFor.wholeNanoseconds) / 1e9
      )
      Gauge(label: "event_server_log_rejoins", factory: factory).record(logRejoins)
    }
    Gauge(
      label: "event_server_build_info",
      dimensions: [("version", applicationVersion), ("library", Self.version)],
      factory: factory
    ).record(1)
  }

  /// What one partition's node of a partitioned node reports when scraped.
  public struct PartitionSample: Sendable, Hashable {
    /// The partition.
    public var partition: Int
    /// Whether this process serves it (holds its lease); the other fields are zero when not.
    public var served: Bool
    /// Turns its node started since it took the partition.
    public var turns: Int
    /// Its node's lag behind the partition's log.
    public var lag: ReplicationLag

    /// A sample of `partition`.
    public init(partition: Int, served: Bool, turns: Int = 0, lag: ReplicationLag = .init(records: 0, behindFor: .zero))
    {
      self.partition = partition
      self.served = served
      self.turns = turns
      self.lag = lag
    }
  }

  /// The per-partition gauges of a partitioned node, sampled when scraped: every partition of the log has
  /// `event_server_partition_served` (1 here, 0 elsewhere), and those served here their turns and lag.
  public func sample(partitions: [PartitionSample]) {
    for sample in partitions {
      let dimensions = [("partition", String(sample.partition))]
      Gauge(label: "event_server_partition_served", dimensions: dimensions, factory: factory).record(
        sample.served ? 1 : 0
      )
      Gauge(label: "event_server_partition_turns", dimensions: dimensions, factory: factory).record(sample.turns)
      Gauge(label: "event_server_partition_lag_records", dimensions: dimensions, factory: factory).record(
        Int(sample.lag.records)
      )
      Gauge(label: "event_server_partition_lag_seconds", dimensions: dimensions, factory: factory).record(
        Double(sample.lag.behindFor.wholeNanoseconds) / 1e9
      )
    }
  }

  /// The library's version, the `library` label of `event_server_build_info`.
  public static var version: String { "0.1.0-dev" }

  /// Every series, in Prometheus's text format.
  public func text() -> String { registry.emitToString() }

  /// The routes counted by name; anything else is `other`, so a scanner cannot grow the series.
  static func route(of path: String) -> String {
    let known = [
      "/api/v1/register", "/api/v1/events", "/api/v1/mutations", "/api/v1/mutation_batches", "/api/v1/push_tokens",
      "/api/v1/server_settings", "/api/v1/fetch",
      "/api/v1/uploads", "/api/v1/uploads/complete", "/api/v1/blobs", "/api/v1/blobs/info",
    ]
    return known.contains(path) ? path : "other"
  }
}

/// An input log that times its appends into ``ServerMetrics``.
struct TimedServerLog: ServerLog {
  let inner: any ServerLog
  let metrics: ServerMetrics

  func load() async throws(ServerLogError) -> StoredLog { try await inner.load() }

  func append(_ records: [StoredRecord]) async throws(ServerLogError) {
    let start = ContinuousClock.now
    try await inner.append(records)
    metrics.logAppended(records: records.count, after: ContinuousClock.now - start)
  }

  func saveSnapshot(_ snapshot: StoredSnapshot) async throws(ServerLogError) { try await inner.saveSnapshot(snapshot) }

  func truncate(after position: UInt64) async throws(ServerLogError) { try await inner.truncate(after: position) }

  func claimForOneServer() async throws(ServerLogError) { try await inner.claimForOneServer() }
}

/// A stored application's log that times its transactions into ``ServerMetrics`` (as appends: a stored
/// input's transaction is its write).
struct TimedTransactionalLog: TransactionalServerLog {
  let inner: any TransactionalServerLog
  let metrics: ServerMetrics
  /// The log's own operations, timed as for an in-memory application.
  private var timed: TimedServerLog { TimedServerLog(inner: inner, metrics: metrics) }

  var dialect: SQLDialect { inner.dialect }

  func load() async throws(ServerLogError) -> StoredLog { try await timed.load() }

  func append(_ records: [StoredRecord]) async throws(ServerLogError) { try await timed.append(records) }

  func saveSnapshot(_ snapshot: StoredSnapshot) async throws(ServerLogError) { try await timed.saveSnapshot(snapshot) }

  func truncate(after position: UInt64) async throws(ServerLogError) { try await timed.truncate(after: position) }

  func claimForOneServer() async throws(ServerLogError) { try await timed.claimForOneServer() }

  func migrate(_ migrations: [SchemaMigration]) async throws(MigrationError) -> MigrationReport {
    try await inner.migrate(migrations)
  }

  func appliedMigrations() async throws(MigrationError) -> [AppliedMigration] { try await inner.appliedMigrations() }

  func transaction<Result: Sendable>(
    _ body: @escaping @Sendable (any LogTransaction) async throws -> Result
  ) async throws -> Result {
    let start = ContinuousClock.now
    let result = try await inner.transaction(body)
    metrics.logAppended(records: 1, after: ContinuousClock.now - start)
    return result
  }
}

/// A shared log that times its turns into ``ServerMetrics`` (as appends: a turn is a cluster node's write).
struct TimedSharedLog: SharedServerLog {
  let inner: any SharedServerLog
  let metrics: ServerMetrics

  func load() async throws(ServerLogError) -> StoredLog { try await inner.load() }

  func append(_ records: [StoredRecord]) async throws(ServerLogError) { try await inner.append(records) }

  func saveSnapshot(_ snapshot: StoredSnapshot) async throws(ServerLogError) { try await inner.saveSnapshot(snapshot) }

  func truncate(after position: UInt64) async throws(ServerLogError) { try await inner.truncate(after: position) }

  func records(after position: UInt64, limit: Int) async throws(ServerLogError) -> [StoredRecord] {
    try await inner.records(after: position, limit: limit)
  }

  func appendTurn(
    after position: UInt64,
    _ decide: @escaping @Sendable ([StoredRecord]) async throws(ServerLogError) -> [StoredRecord]
  ) async throws(ServerLogError) {
    try await metrics.timeTurn { decided throws(ServerLogError) in
      try await inner.appendTurn(after: position) { committed throws(ServerLogError) in
        decided.note(try await decide(committed))
      }
    }
  }

  func waitForAppends(after position: UInt64) async { await inner.waitForAppends(after: position) }

  func claimForOneServer() async throws(ServerLogError) { try await inner.claimForOneServer() }

  func claimPlaceInCluster() async throws(ServerLogError) -> Bool { try await inner.claimPlaceInCluster() }

  var announcedPosition: UInt64 { inner.announcedPosition }
}

/// A stored application's shared log (PostgreSQL, one partition or several) that times its turns into
/// ``ServerMetrics`` as appends, so `event_server_log_append_duration_seconds` and
/// `event_server_log_records_total` exist on every backend. Everything else passes through unchanged: the
/// turn's transaction is the inner log's own (its inbox included).
struct TimedPartitionedLog: PartitionedSharedLog {
  let inner: any PartitionedSharedLog
  let metrics: ServerMetrics

  var dialect: SQLDialect { inner.dialect }
  var partitions: PartitionMap { inner.partitions }
  var partitionIndex: Int { inner.partitionIndex }
  var announcedPosition: UInt64 { inner.announcedPosition }

  func load() async throws(ServerLogError) -> StoredLog { try await inner.load() }

  func append(_ records: [StoredRecord]) async throws(ServerLogError) {
    let start = ContinuousClock.now
    try await inner.append(records)
    metrics.logAppended(records: records.count, after: ContinuousClock.now - start)
  }

  func saveSnapshot(_ snapshot: StoredSnapshot) async throws(ServerLogError) { try await inner.saveSnapshot(snapshot) }

  func truncate(after position: UInt64) async throws(ServerLogError) { try await inner.truncate(after: position) }

  func records(after position: UInt64, limit: Int) async throws(ServerLogError) -> [StoredRecord] {
    try await inner.records(after: position, limit: limit)
  }

  func appendTurn(
    after position: UInt64,
    _ decide: @escaping @Sendable ([StoredRecord]) async throws(ServerLogError) -> [StoredRecord]
  ) async throws(ServerLogError) {
    try await metrics.timeTurn { decided throws(ServerLogError) in
      try await inner.appendTurn(after: position) { committed throws(ServerLogError) in
        decided.note(try await decide(committed))
      }
    }
  }

  func appendTurn(
    after position: UInt64,
    isolation: TurnIsolation,
    inTransaction decide:
      @escaping @Sendable ([StoredRecord], any LogTransaction) async throws(ServerLogError) -> [StoredRecord]
  ) async throws(ServerLogError) {
    try await metrics.timeTurn { decided throws(ServerLogError) in
      try await inner.appendTurn(after: position, isolation: isolation) {
        committed,
        transaction throws(ServerLogError) in
        decided.note(try await decide(committed, transaction))
      }
    }
  }

  func transaction<Result: Sendable>(
    _ body: @escaping @Sendable (any LogTransaction) async throws -> Result
  ) async throws -> Result {
    try await inner.transaction(body)
  }

  func waitForAppends(after position: UInt64) async { await inner.waitForAppends(after: position) }

  func hasInbox() async throws(ServerLogError) -> Bool { try await inner.hasInbox() }

  func waitForInbox() async { await inner.waitForInbox() }

  func claimForOneServer() async throws(ServerLogError) { try await inner.claimForOneServer() }

  func claimPlaceInCluster() async throws(ServerLogError) -> Bool { try await inner.claimPlaceInCluster() }

  func migrate(_ migrations: [SchemaMigration]) async throws(MigrationError) -> MigrationReport {
    try await inner.migrate(migrations)
  }

  func appliedMigrations() async throws(MigrationError) -> [AppliedMigration] { try await inner.appliedMigrations() }

}

/// The records a turn decided, noted by its decision (which may run again, the last noting wins) and read
/// once the turn committed.
final class DecidedRecords: Sendable {
  private let count = Mutex(0)

  /// The turn decided `records`; returns them for the log.
  func note(_ records: [StoredRecord]) -> [StoredRecord] {
    count.withLock { $0 = records.count }
    return records
  }

  var decided: Int { count.withLock { $0 } }
}

extension ServerMetrics {
  /// Runs a turn and records it as an append: its time, lock to commit, and the records it decided.
  func timeTurn(_ turn: (DecidedRecords) async throws(ServerLogError) -> Void) async throws(ServerLogError) {
    let start = ContinuousClock.now
    let records = DecidedRecords()
    try await turn(records)
    logAppended(records: records.decided, after: ContinuousClock.now - start)
  }
}
