import Foundation

/// The identity of one installation of a client app, chosen by the client once and persisted.
///
/// The server remembers the last mutation id it applied per (user, client), so a mutation retried after a
/// lost acknowledgement is applied at most once. Servers refuse ids longer than ``maximumLength``.
public struct ClientID: RawRepresentable, Hashable, Codable, Sendable, ExpressibleByStringLiteral,
  CustomStringConvertible
{
  public let rawValue: String

  public init(stringLiteral value: String) {
    self.rawValue = value
  }

  /// The longest client id a server accepts, in UTF-8 bytes.
  public static let maximumLength = 64

  public init(rawValue: String) {
    self.rawValue = rawValue
  }

  /// A new random id: 15 characters from `[0-9A-Za-z]`, 89 random bits (``QueueID/random(using:)``).
  public static func random(using generator: inout some RandomNumberGenerator) -> ClientID {
    ClientID(rawValue: QueueID.random(using: &generator).rawValue)
  }

  public var description: String { rawValue }
}

/// A client-chosen id for a mutation: strictly increasing per client, starting at 1.
public struct MutationID: RawRepresentable, Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
  public let rawValue: UInt64

  public init(rawValue: UInt64) {
    self.rawValue = rawValue
  }

  /// The mutation id `rawValue`.
  public init(_ rawValue: UInt64) {
    self.rawValue = rawValue
  }

  /// The ids a server accepts: from 1 (an outbox's first) to 2^53 − 1 (the largest integer every JSON
  /// reader keeps exact).
  public static let valid = MutationID(1)...MutationID((1 << 53) - 1)

  public static func < (lhs: MutationID, rhs: MutationID) -> Bool {
    lhs.rawValue < rhs.rawValue
  }

  public var description: String { "m\(rawValue)" }
}

/// A write sent from a client's outbox.
public struct MutationRequest<Mutation: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
  /// The sending installation.
  public var clientID: ClientID
  /// The mutation's id; the server applies each (client, id) at most once.
  public var mutationID: MutationID
  /// What to do.
  public var mutation: Mutation

  /// Creates a MutationRequest from its parts.
  public init(clientID: ClientID, mutationID: MutationID, mutation: Mutation) {
    self.clientID = clientID
    self.mutationID = mutationID
    self.mutation = mutation
  }

  private enum CodingKeys: String, CodingKey {
    case clientID = "client_id"
    case mutationID = "mutation_id"
    case mutation
  }
}

/// The server's acknowledgement of a mutation: applied now, or already applied before.
///
/// ``eventsThrough`` holds, for each of the user's queues at the moment the mutation was applied (or
/// acknowledged again), the id of the last event in it. A client whose finger on one of those queues has
/// reached that id has seen the mutation's effect; a client on a queue that is not listed registered after
/// the mutation was applied, so its snapshot already holds the effect.
public struct MutationReceipt: Codable, Sendable, Equatable {
  /// Whether this request applied the mutation (false: a repeat of one already applied).
  public var applied: Bool
  /// The last event id of each of the user's queues right after the mutation.
  public var eventsThrough: [QueueID: Int]

  /// Creates a MutationReceipt from its parts.
  public init(applied: Bool, eventsThrough: [QueueID: Int]) {
    self.applied = applied
    self.eventsThrough = eventsThrough
  }

  private enum CodingKeys: String, CodingKey {
    case applied
    case eventsThrough = "events_through"
  }

  /// Whether a client holding `finger` has seen the mutation's effect.
  public func isReflected(by finger: EventFinger) -> Bool {
    guard let through = eventsThrough[finger.queueID] else { return true }
    return finger.lastEventID >= through
  }

  /// Whether a client holding `finger` has seen the effect of a mutation it sent while holding a finger on
  /// `queue` (`nil`: while it held none).
  ///
  /// A queue the receipt does not name was not one of the user's queues when the mutation was applied:
  /// usually it was registered after, and its snapshot holds the effect. But the queue the mutation was
  /// sent on existed before: not named, it had ended on the server (expired while the device was offline,
  /// say), and only the next registration's snapshot shows the effect. Until then the write is not
  /// reflected, so it stays pending and the app keeps showing it.
  public func isReflected(by finger: EventFinger, sentOn queue: QueueID?) -> Bool {
    guard let through = eventsThrough[finger.queueID] else { return finger.queueID != queue }
    return finger.lastEventID >= through
  }
}

/// Which client write produced an event: the sending installation and the mutation's id.
///
/// On the wire: `"origin": {"client_id": "…", "mutation_id": 7}` inside the event object.
public struct MutationOrigin: Codable, Sendable, Hashable, CustomStringConvertible {
  /// The installation that sent the mutation.
  public var clientID: ClientID
  /// The mutation's id.
  public var mutationID: MutationID

  /// Creates a MutationOrigin from its parts.
  public init(clientID: ClientID, mutationID: MutationID) {
    self.clientID = clientID
    self.mutationID = mutationID
  }

  private enum CodingKeys: String, CodingKey {
    case clientID = "client_id"
    case mutationID = "mutation_id"
  }

  public var description: String { "\(clientID)/\(mutationID)" }
}

/// A 64-bit fingerprint of a mutation's content (FNV-1a over its canonical JSON: sorted keys).
///
/// The server remembers it with each mutation id it decides, so a repeat of the same write is recognised
/// as a repeat, and a *different* write under an id already used (a client restored from a backup, a
/// counter that went backwards) is refused with ``EventAPIError/Code/mutationIDReused`` instead of being
/// silently acknowledged.
///
/// ```swift
/// let digest = MutationDigest(of: NoteCommand.post("hi"))
/// ```
public struct MutationDigest: RawRepresentable, Hashable, Codable, Sendable, CustomStringConvertible {
  public let rawValue: UInt64

  public init(rawValue: UInt64) {
    self.rawValue = rawValue
  }

  /// The digest of `value`'s canonical JSON encoding; a value that cannot be encoded digests as its
  /// type name, which still tells repeats apart from different types.
  public init(of value: some Encodable) {
    self = Self.measuring(value).digest
  }

  /// The digest of `value` and the size of its canonical JSON encoding (`nil` when it cannot be encoded),
  /// from one encoding: what a server needs to tell repeats apart and to refuse a command too large.
  public static func measuring(_ value: some Encodable) -> (digest: MutationDigest, bytes: Int?) {
    guard let bytes = try? WireFormat.encode(value) else {
      return (MutationDigest(rawValue: FNV1a.hash(Data(String(describing: type(of: value)).utf8))), nil)
    }
    return (MutationDigest(rawValue: FNV1a.hash(bytes)), bytes.count)
  }

  public var description: String { String(rawValue, radix: 16) }
}
