import EventProtocol
import Foundation

/// The queues of an ``EventServer`` as written to disk for a restart, in a versioned envelope.
public struct QueueDump<Event: EventPayload>: Sendable, Equatable, Codable {
  /// The format version this build writes and reads.
  public static var currentVersion: Int { 1 }

  /// The format version of this dump.
  public var version: Int
  /// The queues, in id order.
  public var queues: [EventQueue<Event>]
  /// The last mutation decided per (user, client), so retries stay at most once across the restart.
  public var mutations: [MutationRecord]

  /// Creates a QueueDump from its parts.
  public init(queues: [EventQueue<Event>], mutations: [MutationRecord] = []) {
    self.version = Self.currentVersion
    self.queues = queues
    self.mutations = mutations
  }

  /// Decodes a dump, checking its format version before anything else.
  /// - Throws: ``QueueDumpError/unsupportedVersion(found:supported:)`` or ``QueueDumpError/corrupt(_:)``.
  public static func decode(_ data: Data) throws(QueueDumpError) -> QueueDump {
    guard let version = WireFormat.formatVersion(of: data) else { throw .corrupt("no format version") }
    guard version == currentVersion else { throw .unsupportedVersion(found: version, supported: currentVersion) }
    do {
      return try JSONDecoder().decode(QueueDump.self, from: data)
    } catch {
      throw .corrupt(String(describing: error))
    }
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

/// The last mutation decided for a source: its id, and the rejection reason if the application refused it.
public struct MutationDecision: Hashable, Sendable, Codable {
  /// The id of the last mutation decided.
  public var mutationID: MutationID
  /// Why the application refused it; `nil` when it was applied.
  public var rejection: String?

  /// Creates a MutationDecision from its parts.
  public init(mutationID: MutationID, rejection: String?) {
    self.mutationID = mutationID
    self.rejection = rejection
  }
}

/// One entry of a dump's mutation memory.
public struct MutationRecord: Hashable, Sendable, Codable {
  /// Who sent the mutations.
  public var source: MutationSource
  /// The last one decided.
  public var decision: MutationDecision

  /// Creates a MutationRecord from its parts.
  public init(source: MutationSource, decision: MutationDecision) {
    self.source = source
    self.decision = decision
  }
}

/// Why queues could not be loaded after a restart. The server then starts with no queues.
public struct QueueDumpError: Error, Hashable, Sendable, CustomStringConvertible {
  private enum Code: Hashable {
    case missing
    case unreadable
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

  /// There was no dump file.
  public static func missing(_ path: String) -> QueueDumpError { .init(.missing, "no queue dump at \(path)") }
  /// The file could not be read.
  public static func unreadable(_ detail: String) -> QueueDumpError { .init(.unreadable, detail) }
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
