import EventProtocol
import Foundation

/// A transport that talks to an in-process ``EventServer`` as one user: what tests, the demo and the
/// simulation give an `UpdateMachine`.
///
/// With `throughWire`, every reply (and error) is encoded to Zulip-shaped JSON with `WireFormat` and
/// decoded back, so the engine is exercised against the real encoding.
///
/// ```swift
/// let transport = InProcessTransport(server: server, user: "alice")
/// let registration = try await transport.register(eventTypes: nil, lifespan: nil, clientID: nil)
/// ```
public struct InProcessTransport<Application: ServerApplication, C: Clock>: EventTransport
where C.Duration == Duration, Application.Command: Codable & Equatable {
  public typealias State = Application.Snapshot
  public typealias Event = Application.Event
  public typealias Mutation = Application.Command

  /// The server.
  public let server: EventServer<Application, C>
  /// The authenticated user every request is made as.
  public let user: UserID
  /// Whether replies go through the JSON wire format.
  public let throughWire: Bool

  /// Creates a InProcessTransport from its parts.
  public init(server: EventServer<Application, C>, user: UserID, throughWire: Bool = false) {
    self.server = server
    self.user = user
    self.throughWire = throughWire
  }

  public func register(
    eventTypes: Set<String>?,
    lifespan: Duration?,
    clientID: ClientID?
  ) async throws(TransportError) -> Registration<State> {
    let registration: Registration<State>
    do {
      registration = try await server.register(
        user: user,
        eventTypes: eventTypes,
        lifespan: lifespan,
        clientID: clientID
      )
    } catch {
      // The server's log failed: what an HTTP server answers with 503.
      throw .serverError(status: 503)
    }
    return try wire(registration)
  }

  public func poll(
    after finger: EventFinger,
    dontBlock: Bool,
    limit: Int?
  ) async throws(TransportError) -> [EventEnvelope<Event>] {
    do {
      let events = try await server.events(
        queueID: finger.queueID,
        user: user,
        lastEventID: finger.lastEventID,
        dontBlock: dontBlock,
        limit: limit
      )
      return try wire(EventsReply(events: events, queueID: finger.queueID)).events
    } catch let error as EventAPIError {
      throw wireError(error)
    } catch let error as TransportError {
      throw error
    } catch is ServerLogError {
      throw .serverError(status: 503)
    } catch {
      throw .cancelled
    }
  }

  public func submit(
    _ request: MutationRequest<Mutation>,
    queueID: QueueID?
  ) async throws(TransportError) -> MutationReceipt {
    let receipt: MutationReceipt
    do {
      receipt = try await server.applyMutation(
        request.mutation,
        from: user,
        clientID: request.clientID,
        mutationID: request.mutationID
      )
    } catch let error as EventAPIError {
      throw wireError(error)
    } catch {
      throw .serverError(status: 503)
    }
    return try wire(receipt)
  }

  public func submit(
    _ batch: MutationBatch<Mutation>,
    queueID: QueueID?
  ) async throws(TransportError) -> [MutationOutcome] {
    let outcomes: [MutationOutcome]
    do {
      outcomes = try await server.applyMutations(batch, from: user)
    } catch let error as EventAPIError {
      throw wireError(error)
    } catch {
      throw .serverError(status: 503)
    }
    return try wire(MutationBatchReply(outcomes: outcomes)).outcomes
  }

  public func fetch<Item: Codable & Sendable & Equatable>(
    _ request: FetchRequest,
    queueID: QueueID,
    as itemType: Item.Type
  ) async throws(TransportError) -> FetchAnswer<Item> {
    let answer: FetchAnswer<Application.FetchedItem>
    do {
      answer = try await server.fetch(request, queueID: queueID, user: user)
    } catch {
      throw wireError(error)
    }
    if throughWire {
      do {
        return try WireFormat.decode(FetchAnswer<Item>.self, from: WireFormat.encodeSuccess(answer))
      } catch let error as EventAPIError {
        throw .api(error)
      } catch {
        throw .api(.malformedResponse(String(describing: error)))
      }
    }
    guard let typed = answer as? FetchAnswer<Item> else {
      throw .api(.malformedResponse("the server's items are \(Application.FetchedItem.self), not \(Item.self)"))
    }
    return typed
  }

  private func wire<Reply: Codable>(_ reply: Reply) throws(TransportError) -> Reply {
    guard throughWire else { return reply }
    do {
      return try WireFormat.decode(Reply.self, from: WireFormat.encodeSuccess(reply))
    } catch let error as EventAPIError {
      throw .api(error)
    } catch {
      throw .api(.malformedResponse(String(describing: error)))
    }
  }

  private func wireError(_ error: EventAPIError) -> TransportError {
    guard throughWire else { return .api(error) }
    do {
      _ = try WireFormat.decode(MutationReceipt.self, from: WireFormat.encode(error))
      return .api(.malformedResponse("an error body decoded as a success"))
    } catch let decoded as EventAPIError {
      return .api(decoded)
    } catch {
      return .api(.malformedResponse(String(describing: error)))
    }
  }
}

/// A success body that carries a reply's fields beside `result` and `msg`.
