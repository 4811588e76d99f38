import EventProtocol

/// The in-memory side of a ``StoredApplication`` inside the server's state machine: it holds none of the
/// application's state (that is in the database) and hands the machine what the application decided in its
/// transaction, so the queues, the mutation memory and the input log work exactly as for an in-memory
/// application, and replay after a restart delivers the same events without asking the database.
///
/// Its snapshot and fetched pages are staged by the server for the one step that reads them; outside that
/// step it has none (`nil`). Only ``EventServer/serving(_:from:configuration:clock:anchor:random:pushGateway:snapshots:)``
/// makes one; an application developer never uses it directly.
public struct StoredRelay<Stored: StoredApplication>: ServerApplication, Codable {
  public typealias Snapshot = Stored.Snapshot?
  public typealias Event = Stored.Event
  public typealias Command = StoredCommand<Stored.Command, Stored.Event>
  public typealias FetchedItem = Stored.FetchedItem

  /// The snapshot the current registration read from the database.
  var stagedSnapshot: Stored.Snapshot?
  /// The page the current fetch read from the database.
  var stagedPage: FetchPage<Stored.FetchedItem>?
  /// The application's next deadline, as it last said.
  var deadline: Timestamp?
  /// When the server's clock reached ``deadline`` and the deadline's work is still to run.
  var deadlineDue: Timestamp?

  /// A relay with nothing staged.
  public init() {}

  public init(from decoder: any Decoder) throws {
    self.init()
  }

  public func encode(to encoder: any Encoder) throws {
    // Nothing to keep: the application's state is in its tables.
    _ = encoder.container(keyedBy: NoKeys.self)
  }

  private enum NoKeys: CodingKey {}

  public func snapshot(for user: UserID) -> Stored.Snapshot? { stagedSnapshot }

  public func handle(_ command: Command, from user: UserID) throws(CommandRejection) -> [Delivery<Event>] {
    switch command {
    case .request:
      throw CommandRejection("a stored application's command is decided in its database, not in memory")
    case .delivered(let deliveries):
      return deliveries
    case .rejected(let reason):
      throw CommandRejection(reason)
    }
  }

  public func fetch(_ request: FetchRequest, for user: UserID) throws(CommandRejection) -> FetchPage<FetchedItem> {
    guard let stagedPage else { throw CommandRejection("a stored application's page is read from its database") }
    return stagedPage
  }

  public var nextDeadline: Timestamp? { deadline }

  public mutating func deadlineReached(at now: Timestamp) -> [Delivery<Event>] {
    // The work runs in a database transaction the server starts next; it is recorded as it decides it.
    deadline = nil
    deadlineDue = now
    return []
  }
}

/// A stored application's command as the server's machine and log see it: the request as it came over the
/// wire, or what the application decided about it in its database transaction.
///
/// A request encodes exactly as the application's own command (the wire and the mutation's digest are those
/// of ``StoredApplication/Command``); a decision encodes under a reserved key, `"$stored"`, which the server
/// refuses in a request from a client.
public enum StoredCommand<Command: Codable & Sendable & Equatable, Event: EventPayload>: Codable, Sendable,
  Equatable
{
  /// The command as a client sent it, not yet decided.
  case request(Command)
  /// The application accepted it and delivered these events (recorded in the log).
  case delivered([Delivery<Event>])
  /// The application refused it for this reason (recorded in the log, so a repeat meets the same answer).
  case rejected(String)

  private enum Keys: String, CodingKey {
    case stored = "$stored"
  }

  private enum DecisionKeys: String, CodingKey {
    case deliveries
    case rejection
  }

  public init(from decoder: any Decoder) throws {
    if let container = try? decoder.container(keyedBy: Keys.self), container.contains(.stored) {
      let decision = try container.nestedContainer(keyedBy: DecisionKeys.self, forKey: .stored)
      if let reason = try decision.decodeIfPresent(String.self, forKey: .rejection) {
        self = .rejected(reason)
      } else {
        self = .delivered(try decision.decode([Delivery<Event>].self, forKey: .deliveries))
      }
      return
    }
    self = .request(try Command(from: decoder))
  }

  public func encode(to encoder: any Encoder) throws {
    switch self {
    case .request(let command):
      try command.encode(to: encoder)
    case .delivered(let deliveries):
      var container = encoder.container(keyedBy: Keys.self)
      var decision = container.nestedContainer(keyedBy: DecisionKeys.self, forKey: .stored)
      try decision.encode(deliveries, forKey: .deliveries)
    case .rejected(let reason):
      var container = encoder.container(keyedBy: Keys.self)
      var decision = container.nestedContainer(keyedBy: DecisionKeys.self, forKey: .stored)
      try decision.encode(reason, forKey: .rejection)
    }
  }

  /// The request, when this is one (what a client may send).
  public var request: Command? {
    if case .request(let command) = self { command } else { nil }
  }
}

extension Delivery: Codable {
  private enum CodingKeys: String, CodingKey {
    case recipients
    case event
  }

  // The event is kept as the wire carries it, in an envelope (its `type` beside its fields: a payload's own
  // encoding may leave the type to the envelope), with id 0.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    let envelope = try container.decode(EventEnvelope<Event>.self, forKey: .event)
    guard case .payload(let event) = envelope.body else {
      throw DecodingError.dataCorruptedError(
        forKey: .event,
        in: container,
        debugDescription: "a delivery's event of type \(envelope.body.type) is not one of this build's"
      )
    }
    self.init(to: try container.decode([UserID].self, forKey: .recipients), event: event)
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(recipients, forKey: .recipients)
    try container.encode(EventEnvelope(id: 0, body: .payload(event)), forKey: .event)
  }
}
