import EventProtocol
import Foundation

extension PersistedRecord {
  /// Encodes the record as JSON.
  public func encoded() throws(PersistenceError) -> Data {
    do {
      return try WireFormat.encode(self)
    } catch {
      throw .writeFailed("cannot encode the record: \(error)")
    }
  }

  /// Decodes a record, checking its format version first.
  /// - Throws: ``PersistenceError/newerVersion(found:supported:)`` for a newer format;
  ///   ``PersistenceError/corrupt(_:)`` for anything that is not a valid record.
  public static func decode(_ data: Data) throws(PersistenceError) -> PersistedRecord {
    guard let version = WireFormat.formatVersion(of: data) else {
      throw .corrupt("not a persisted record: no format version")
    }
    guard version <= currentVersion else { throw .newerVersion(found: version, supported: currentVersion) }
    guard version == currentVersion else { throw .corrupt("unknown format version \(version)") }
    do {
      return try JSONDecoder().decode(PersistedRecord.self, from: data)
    } catch {
      throw .corrupt("not a valid record: \(error)")
    }
  }
}
