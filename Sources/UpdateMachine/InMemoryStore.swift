import Foundation
import Synchronization

/// A store that keeps the record in memory: for tests, previews and apps that do not persist.
public final class InMemoryStore: UpdateStore {
  private struct Contents {
    var data: Data?
    var setAside: [Data] = []
  }

  private let contents: Mutex<Contents>

  /// Creates a store holding `data`.
  public init(data: Data? = nil) {
    self.contents = Mutex(Contents(data: data))
  }

  /// The bytes stored now.
  public var data: Data? { contents.withLock { $0.data } }
  /// Everything set aside, oldest first.
  public var setAsideData: [Data] { contents.withLock { $0.setAside } }

  public func load() throws(PersistenceError) -> Data? { data }

  public func save(_ data: Data) throws(PersistenceError) {
    contents.withLock { $0.data = data }
  }

  public func setAside(reason: String) throws(PersistenceError) -> String {
    contents.withLock { contents in
      if let data = contents.data { contents.setAside.append(data) }
      contents.data = nil
      return "memory#\(contents.setAside.count)"
    }
  }
}
