import EventProtocol
import Foundation

/// How an ``EventServer`` serves a ``StoredApplication``: the steps its requests take instead of the
/// in-memory ones. Built once, where the application's type is known; the server's public requests hand
/// themselves to it.
struct StoredDriver<Application: ServerApplication, C: Clock>: Sendable where C.Duration == Duration {
  typealias Server = EventServer<Application, C>

  /// The database holding the application's tables and the server's log.
  let log: any TransactionalServerLog

  let register:
    @Sendable (Server, UserID, Set<String>?, Duration?, ClientID?) async throws(ServerLogError) ->
      Registration<Application.Snapshot>
  let applyMutation:
    @Sendable (Server, Application.Command, UserID, ClientID, MutationID) async throws -> MutationReceipt
  /// A batch of one device's mutations, in order (the mutation window's share of a ``MutationBatch``).
  let applyMutations:
    @Sendable (Server, [(mutation: Application.Command, clientID: ClientID, mutationID: MutationID)], UserID)
      async throws -> [MutationOutcome]
  let handle: @Sendable (Server, Application.Command, UserID) async throws -> Void
  let fetch:
    @Sendable (Server, FetchRequest, QueueID, UserID) async throws(EventAPIError) -> FetchAnswer<
      Application.FetchedItem
    >
  let runDeadlineIfDue: @Sendable (Server) async -> Void
  /// Reads the application's next deadline again (partition 0's look, see ``EventServer/lookForStoredDeadline()``).
  let readDeadline: @Sendable (Server) async throws -> Void
  /// Each user's partition key (``StoredApplication/partitionKey(for:)``).
  let partitionKey: @Sendable (UserID) -> String
  /// Delivers messages other partitions left in this partition's inbox (in a turn, holding the log).
  let receive: @Sendable (isolated Server, [Data]) throws(ServerLogError) -> Void
}

extension StoredDriver {
  /// The steps of a server serving `application` from `log`.
  static func serving<Stored: StoredApplication>(
    _ application: Stored,
    from log: any TransactionalServerLog
  ) -> StoredDriver where Application == StoredRelay<Stored> {
    StoredDriver(
      log: log,
      register: { (server, user, eventTypes, lifespan, clientID) throws(ServerLogError) in
        try await server.storedRegister(
          application,
          from: log,
          user: user,
          eventTypes: eventTypes,
          lifespan: lifespan,
          clientID: clientID
        )
      },
      applyMutation: { server, command, user, clientID, mutationID in
        try await server.storedMutation(
          application,
          from: log,
          command: command,
          user: user,
          clientID: clientID,
          mutationID: mutationID
        )
      },
      applyMutations: { server, requests, user in
        try await server.storedMutations(application, from: log, requests: requests, user: user)
      },
      handle: { server, command, user in
        try await server.storedHandle(application, from: log, command: command, user: user)
      },
      fetch: { (server, request, queueID, user) throws(EventAPIError) in
        try await server.storedFetch(application, from: log, request: request, queueID: queueID, user: user)
      },
      runDeadlineIfDue: { server in await server.storedDeadlineIfDue(application, from: log) },
      readDeadline: { server in try await server.readStoredDeadline(application, from: log, starting: false) },
      partitionKey: { application.partitionKey(for: $0) },
      receive: { (server, messages) throws(ServerLogError) in
        try server.receivePartitionMessages(messages, of: Stored.self)
      }
    )
  }
}
