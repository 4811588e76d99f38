import Foundation
import Synchronization

/// A store that keeps the record (and its journal) in memory: for tests, previews and apps that do not
/// persist.
public final class InMemoryStore: JournalingUpdateStore {
  private struct Contents {
    var data: Data?
    /// The entries appended after `data`; `nil` when no journal is bound to it.
    var journal: [Data]?
    var setAside: [Data] = []
  }

  private let contents: Mutex<Contents>

  /// Creates a store holding `data`, and the journal entries `journal` after it (none bound when `nil`).
  public init(data: Data? = nil, journal: [Data]? = nil) {
    self.contents = Mutex(Contents(data: data, journal: journal))
  }

  /// The bytes stored now.
  public var data: Data? { contents.withLock { $0.data } }
  /// The journal entries appended after the stored bytes; `nil` when none is bound to them.
  public var journal: [Data]? { contents.withLock { $0.journal } }
  /// Everything set aside, oldest first.
  public var setAsideData: [Data] { contents.withLock { $0.setAside } }

  public func load() throws(PersistenceError) -> Data? { data }

  public func save(_ data: Data) throws(PersistenceError) {
    contents.withLock {
      $0.data = data
      $0.journal = []
    }
  }

  public func appendToJournal(_ entry: Data) throws(PersistenceError) {
    let appended = contents.withLock { contents -> Bool in
      guard contents.journal != nil else { return false }
      contents.journal!.append(entry)
      return true
    }
    if !appended { throw .writeFailed("no journal is bound to the stored record") }
  }

  public func loadJournal(after record: Data) throws(PersistenceError) -> [Data]? {
    contents.withLock { $0.data == record ? $0.journal : nil }
  }

  public func setAside(reason: String) throws(PersistenceError) -> String {
    contents.withLock { contents in
      if let data = contents.data { contents.setAside.append(data) }
      contents.data = nil
      contents.journal = nil
      return "memory#\(contents.setAside.count)"
    }
  }
}
