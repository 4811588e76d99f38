import EventProtocol
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A blob store in a directory: a partial blob is a `~partial` file appended to and flushed (`fsync`) on
/// every append, so a transfer killed between any two writes resumes from the file's length; completing
/// renames it to its final name, so a blob appears whole or not at all.
///
/// File names are the keys percent-encoded (everything but letters, digits, `-`, `_` and `.`), so no key
/// names a file outside the directory, and none names a partial file: `~` is always encoded in a key's name.
///
/// ```swift
/// let store = FileBlobStore(directory: URL.applicationSupportDirectory.appending(path: "Videos"))
/// ```
public struct FileBlobStore: BlobStore {
  /// The directory holding the blobs.
  public let directory: URL

  /// Creates a store in `directory` (created when missing).
  public init(directory: URL) {
    self.directory = directory
  }

  private func fileName(_ key: BlobKey) -> String {
    key.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-_.")))
      ?? key.rawValue
  }

  private func completeURL(_ key: BlobKey) -> URL { directory.appendingPathComponent(fileName(key)) }
  /// A partial blob's file: a name no key's file name can be (`~` is always percent-encoded in those).
  private func partialURL(_ key: BlobKey) -> URL {
    directory.appendingPathComponent(fileName(key) + Self.partialSuffix)
  }

  private static let partialSuffix = "~partial"

  private func ensureDirectory() throws(BlobStoreError) {
    do {
      try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    } catch {
      throw .unavailable("cannot create \(directory.path): \(error)")
    }
  }

  private func length(of url: URL) -> Int? {
    (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.intValue
  }

  public func partialLength(_ key: BlobKey) async throws(BlobStoreError) -> Int {
    length(of: partialURL(key)) ?? 0
  }

  public func append(_ bytes: Data, to key: BlobKey, at offset: Int) async throws(BlobStoreError) {
    try ensureDirectory()
    let url = partialURL(key)
    let current = length(of: url) ?? 0
    guard current == offset else { throw .offsetMismatch(expected: current, got: offset) }
    do {
      // Written with POSIX calls: Foundation's createFile leaves a hidden temporary behind when killed.
      try DurableFile.save(bytes, to: url.path, appending: true)
    } catch {
      throw .unavailable("cannot append: \(error)")
    }
  }

  public func complete(_ key: BlobKey, at time: Timestamp) async throws(BlobStoreError) {
    let partial = partialURL(key)
    let final = completeURL(key)
    guard FileManager.default.fileExists(atPath: partial.path) else {
      if FileManager.default.fileExists(atPath: final.path) { return }
      throw .gone(key)
    }
    guard rename(partial.path, final.path) == 0 else {
      throw .unavailable("cannot complete \(final.path): \(String(cString: strerror(errno)))")
    }
    DurableFile.syncFolder(directory.path)
  }

  public func size(of key: BlobKey) async throws(BlobStoreError) -> Int {
    guard let size = length(of: completeURL(key)) else { throw .gone(key) }
    return size
  }

  public func read(_ key: BlobKey, offset: Int, length: Int) async throws(BlobStoreError) -> Data {
    let url = completeURL(key)
    guard FileManager.default.fileExists(atPath: url.path) else { throw .gone(key) }
    do {
      let handle = try FileHandle(forReadingFrom: url)
      defer { try? handle.close() }
      try handle.seek(toOffset: UInt64(max(offset, 0)))
      return try handle.read(upToCount: max(length, 0)) ?? Data()
    } catch {
      throw .unavailable("cannot read \(url.path): \(error)")
    }
  }

  public func delete(_ key: BlobKey) async throws(BlobStoreError) {
    for url in [completeURL(key), partialURL(key)] where FileManager.default.fileExists(atPath: url.path) {
      do {
        try FileManager.default.removeItem(at: url)
      } catch {
        throw .unavailable("cannot delete \(url.path): \(error)")
      }
    }
  }

  public func list() async throws(BlobStoreError) -> [BlobInfo] {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return [] }
    return names.filter { !$0.hasSuffix(Self.partialSuffix) }.sorted().compactMap { name in
      let url = directory.appendingPathComponent(name)
      guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path),
        let size = (attributes[.size] as? NSNumber)?.intValue
      else { return nil }
      let modified = (attributes[.modificationDate] as? Date) ?? Date(timeIntervalSince1970: 0)
      return BlobInfo(
        key: BlobKey(rawValue: name.removingPercentEncoding ?? name),
        size: size,
        createdAt: Timestamp(modified)
      )
    }
  }
}
