import EventServer
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// Who uses the database: one server alone, or the nodes of a cluster, each claim held by a session of
/// its own.
extension PostgresServerLog {
  /// Claims the database for this one server: refused while another server or any cluster node uses it.
  /// Held by a session of its own until ``close()`` or the process's end (PostgreSQL releases a dead
  /// session's locks).
  /// - Throws: ``ServerLogError/inUse(_:)``; ``ServerLogError/storage(_:)`` when the database cannot answer.
  public func claimForOneServer() async throws(ServerLogError) {
    guard partitions.count == 1 else {
      throw .inUse("\(location) has \(partitions.count) partitions: it is served by cluster nodes, not by one server")
    }
    let key = Self.serverLockKey
    let logger = logger
    let claim = try await holdSession { connection in
      try await Self.bool("SELECT pg_try_advisory_lock(\(key))", on: connection, logger: logger)
        ? .held(startsCluster: false) : .refused
    }
    guard claim != .refused else {
      throw .inUse(
        "\(location) is used by another server or by cluster nodes: stop it first (one server per database)"
      )
    }
  }

  /// Claims a place among the cluster's nodes: refused while one server (not a node) holds the database.
  /// On partition *p* > 0 (``partition(_:)``), a place among that partition's nodes.
  /// - Returns: Whether no other node held a place (this node starts the cluster, or the partition, again).
  /// - Throws: ``ServerLogError/inUse(_:)``; ``ServerLogError/storage(_:)`` when the database cannot answer.
  public func claimPlaceInCluster() async throws(ServerLogError) -> Bool {
    let key = placeKey
    let logger = logger
    let claim = try await holdSession { connection in
      // Exclusive at once: nobody else is here, this node starts the cluster. It then keeps a shared hold, as
      // every node does, and lets the exclusive one go.
      if try await Self.bool("SELECT pg_try_advisory_lock(\(key))", on: connection, logger: logger) {
        try await connection.query("SELECT pg_advisory_lock_shared(\(key))", logger: logger)
        try await connection.query("SELECT pg_advisory_unlock(\(key))", logger: logger)
        return .held(startsCluster: true)
      }
      return try await Self.bool("SELECT pg_try_advisory_lock_shared(\(key))", on: connection, logger: logger)
        ? .held(startsCluster: false) : .refused
    }
    guard case .held(let startsCluster) = claim else {
      throw .inUse("\(location) is held by a server that is not a cluster node: stop it first")
    }
    return startsCluster
  }

  /// What a claim found.
  private enum Claim: Equatable, Sendable {
    case held(startsCluster: Bool)
    case refused
  }

  /// Runs `attempt` on a connection of its own and, when it holds a lock, keeps that session open (and the
  /// lock with it) until ``close()``. Answered within ``operationTimeout``.
  private func holdSession(
    _ attempt: @escaping @Sendable (PostgresConnection) async throws -> Claim
  ) async throws(ServerLogError) -> Claim {
    let (answers, answer) = AsyncStream.makeStream(of: Result<Claim, ServerLogError>.self)
    let logger = logger
    let location = location
    let client = client
    let sharesConnections = running == nil
    let holder = Task {
      do {
        try await client.withConnection { connection in
          let claim = try await attempt(connection)
          answer.yield(.success(claim))
          guard claim != .refused else { return }
          while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
          // A log closing connections of its own ends the session, and its locks with it. A view sharing its
          // log's connections lets go before handing the connection back; the query is not awaited by any
          // stop, which would otherwise wait as long as a loaded database takes to answer it.
          if sharesConnections {
            _ = try? await connection.query("SELECT pg_advisory_unlock_all()", logger: logger)
          }
        }
      } catch {
        answer.yield(.failure(.storage("\(location): cannot claim the database: \(String(reflecting: error))")))
      }
      answer.finish()
    }
    let first: Result<Claim, ServerLogError>
    do {
      first = try await withDeadline {
        var iterator = answers.makeAsyncIterator()
        return await iterator.next() ?? .failure(.storage("\(location): the claim ended without an answer"))
      }
    } catch {
      holder.cancel()
      throw error
    }
    switch first {
    case .success(let claim) where claim != .refused:
      claimHolder.withLock { $0 = holder }
      return claim
    case .success(let claim):
      return claim
    case .failure(let error):
      holder.cancel()
      throw error
    }
  }

  /// The one boolean `query` answers on `connection`.
  static func bool(
    _ query: PostgresQuery,
    on connection: PostgresConnection,
    logger: Logger
  ) async throws -> Bool {
    var value = false
    for try await row in try await connection.query(query, logger: logger).decode(Bool.self) { value = row }
    return value
  }
}
