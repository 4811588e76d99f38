import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A store that keeps the record in one file, replaced atomically: the bytes go to a temporary file in the
/// same folder, which is flushed to disk (`fsync`) and renamed over the old one.
///
/// ```swift
/// let store = FileStore(url: URL.documentsDirectory.appending(path: "videos.updatemachine.json"))
/// ```
public struct FileStore: UpdateStore {
  /// The file.
  public let url: URL

  /// Creates a FileStore from its parts.
  public init(url: URL) {
    self.url = url
  }

  public func load() throws(PersistenceError) -> Data? {
    guard FileManager.default.fileExists(atPath: url.path) else { return nil }
    do {
      return try Data(contentsOf: url)
    } catch {
      throw .unreadable("cannot read \(url.path): \(error)")
    }
  }

  public func save(_ data: Data) throws(PersistenceError) {
    let folder = url.deletingLastPathComponent()
    let temporary = folder.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp")
    guard FileManager.default.createFile(atPath: temporary.path, contents: data) else {
      throw .writeFailed("cannot create \(temporary.path)")
    }
    do {
      let handle = try FileHandle(forWritingTo: temporary)
      try handle.synchronize()
      try handle.close()
    } catch {
      try? FileManager.default.removeItem(at: temporary)
      throw .writeFailed("cannot flush \(temporary.path): \(error)")
    }
    guard rename(temporary.path, url.path) == 0 else {
      let reason = String(cString: strerror(errno))
      try? FileManager.default.removeItem(at: temporary)
      throw .writeFailed("cannot rename over \(url.path): \(reason)")
    }
    let directory = open(folder.path, O_RDONLY)
    if directory >= 0 {
      _ = fsync(directory)
      _ = close(directory)
    }
  }

  public func setAside(reason: String) throws(PersistenceError) -> String {
    var destination = url.appendingPathExtension("unreadable")
    var counter = 1
    while FileManager.default.fileExists(atPath: destination.path) {
      counter += 1
      destination = url.appendingPathExtension("unreadable-\(counter)")
    }
    do {
      try FileManager.default.moveItem(at: url, to: destination)
    } catch {
      throw .writeFailed("cannot move \(url.path) aside: \(error)")
    }
    return destination.path
  }
}
