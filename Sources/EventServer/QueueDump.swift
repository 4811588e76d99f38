import EventProtocol
import Foundation
import JSONCoding

/// The queues of an ``EventServer``, the mutation memory and the push tokens, in a versioned envelope: the
/// queue part of a ``ServerSnapshot``.
public struct QueueDump<Event: EventPayload>: Sendable, Equatable, Codable {
  /// The format version this build writes; it also reads version 1 (no mutation digests).
  public static var currentVersion: Int { 2 }

  /// The format version of this dump.
  public var version: Int
  /// The queues, in id order.
  public var queues: [EventQueue<Event>]
  /// The last mutation decided per (user, client), so retries stay at most once across the restart.
  public var mutations: [MutationRecord]
  /// The installations' push registrations.
  public var pushes: [PushRecord]

  /// Creates a QueueDump from its parts.
  public init(queues: [EventQueue<Event>], mutations: [MutationRecord] = [], pushes: [PushRecord] = []) {
    self.version = Self.currentVersion
    self.queues = queues
    self.mutations = mutations
    self.pushes = pushes
  }

  private enum CodingKeys: String, CodingKey {
    case version
    case queues
    case mutations
    case pushes
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    self.version = try container.decode(Int.self, forKey: .version)
    self.queues = try container.decode([EventQueue<Event>].self, forKey: .queues)
    self.mutations = try container.decodeIfPresent([MutationRecord].self, forKey: .mutations) ?? []
    self.pushes = try container.decodeIfPresent([PushRecord].self, forKey: .pushes) ?? []
  }

  /// Decodes a dump, checking its format version before anything else.
  /// - Throws: ``QueueDumpError/unsupportedVersion(found:supported:)`` or ``QueueDumpError/corrupt(_:)``.
  public static func decode(_ data: Data) throws(QueueDumpError) -> QueueDump {
    guard let version = WireFormat.formatVersion(of: data) else { throw .corrupt("no format version") }
    guard (1...currentVersion).contains(version) else {
      throw .unsupportedVersion(found: version, supported: currentVersion)
    }
    var dump: QueueDump
    do {
      dump = try WireJSON.decode(QueueDump.self, from: data)
    } catch {
      throw .corrupt(String(describing: error))
    }
    dump.version = currentVersion
    try dump.validate()
    return dump
  }

  /// Checks the version and every queue's invariants (ids increasing, above the pruned mark, unique ids).
  /// - Throws: ``QueueDumpError`` naming the first problem.
  public func validate() throws(QueueDumpError) {
    guard version == Self.currentVersion else {
      throw .unsupportedVersion(found: version, supported: Self.currentVersion)
    }
    var seen: Set<QueueID> = []
    for queue in queues {
      guard seen.insert(queue.id).inserted else { throw .corrupt("queue \(queue.id) appears twice") }
      if let problem = queue.validatedAfterDecoding() { throw .corrupt(problem) }
    }
    guard Set(mutations.map(\.source)).count == mutations.count else { throw .corrupt("a client appears twice") }
    for record in mutations {
      let ids = record.memory.decisions.map(\.mutationID)
      guard zip(ids, ids.dropFirst()).allSatisfy({ $0 < $1 }) else {
        throw .corrupt("client \(record.source.clientID): mutation ids out of order")
      }
      guard record.source.clientID.rawValue.utf8.count <= ClientID.maximumLength else {
        throw .corrupt("client id \(record.source.clientID.rawValue.prefix(16))… is too long")
      }
    }
  }
}

/// Who sent a mutation: the user and their installation.
public struct MutationSource: Hashable, Comparable, Sendable, Codable {
  /// The user who sent the mutation.
  public var user: UserID
  /// The installation that sent it.
  public var clientID: ClientID

  /// Creates a MutationSource from its parts.
  public init(user: UserID, clientID: ClientID) {
    self.user = user
    self.clientID = clientID
  }

  public static func < (lhs: MutationSource, rhs: MutationSource) -> Bool {
    (lhs.user.rawValue, lhs.clientID.rawValue) < (rhs.user.rawValue, rhs.clientID.rawValue)
  }
}

/// One decision of the server about a client's mutation: its id, a digest of the write, and the rejection
/// reason if the application refused it.
public struct MutationDecision: Hashable, Sendable, Codable {
  /// The mutation's id.
  public var mutationID: MutationID
  /// The digest of the write; `nil` in dumps written before digests were kept (any repeat then counts as
  /// a true repeat, as it did then).
  public var digest: MutationDigest?
  /// Why the application refused it; `nil` when it was applied.
  public var rejection: String?

  /// Creates a MutationDecision from its parts.
  public init(mutationID: MutationID, digest: MutationDigest?, rejection: String?) {
    self.mutationID = mutationID
    self.digest = digest
    self.rejection = rejection
  }
}

/// One client's entry of a dump's mutation memory.
public struct MutationRecord: Hashable, Sendable, Codable {
  /// Who sent the mutations.
  public var source: MutationSource
  /// What is remembered of them.
  public var memory: MutationMemory.ClientMemory

  /// Creates a MutationRecord from its parts.
  public init(source: MutationSource, memory: MutationMemory.ClientMemory) {
    self.source = source
    self.memory = memory
  }

  private enum CodingKeys: String, CodingKey {
    case source
    case memory
    /// Version 1 dumps kept only the last decision, with no digest and no time.
    case decision
  }

  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    self.source = try container.decode(MutationSource.self, forKey: .source)
    if let memory = try container.decodeIfPresent(MutationMemory.ClientMemory.self, forKey: .memory) {
      self.memory = memory
    } else {
      let decision = try container.decode(MutationDecision.self, forKey: .decision)
      self.memory = MutationMemory.ClientMemory(lastSeen: .distantPast, decisions: [decision])
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(source, forKey: .source)
    try container.encode(memory, forKey: .memory)
  }
}

/// Why a queue dump (the queues of a snapshot) is refused.
public struct QueueDumpError: Error, Hashable, Sendable, CustomStringConvertible {
  private enum Code: Hashable {
    case corrupt
    case unsupportedVersion
  }

  private let code: Code
  /// What went wrong, for logs.
  public let detail: String

  private init(_ code: Code, _ detail: String) {
    self.code = code
    self.detail = detail
  }

  /// The file is not a valid dump (bad JSON, or state that breaks the queues' invariants).
  public static func corrupt(_ detail: String) -> QueueDumpError { .init(.corrupt, "corrupt queue dump: \(detail)") }
  /// The file was written in a format this build does not read.
  public static func unsupportedVersion(found: Int, supported: Int) -> QueueDumpError {
    .init(.unsupportedVersion, "queue dump version \(found) is not supported (this build reads \(supported))")
  }

  /// Whether two errors are of the same kind, whatever their detail.
  public func isSameKind(as other: QueueDumpError) -> Bool { code == other.code }

  public var description: String { detail }
}
