import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A store that keeps the record in one file, replaced atomically: the bytes go to a temporary file in the
/// same folder, which is flushed to disk (`fsync`) and renamed over the old one, and the folder is flushed.
///
/// The folder is created on the first save if it does not exist (Application Support does not exist on a
/// new iOS install). Temporary files left by a crash in the middle of a save are removed by ``load()``.
///
/// ```swift
/// let store = FileStore(
///   url: URL.applicationSupportDirectory.appending(path: "Sync/videos.json"),
///   protection: .completeUntilFirstUserAuthentication
/// )
/// ```
public struct FileStore: UpdateStore {
  /// The data protection class of the file, on the platforms that have one (iOS, watchOS, tvOS, visionOS);
  /// ignored elsewhere.
  public enum Protection: Sendable, Hashable {
    /// No protection class is set: the system default.
    case systemDefault
    /// Readable once the user has unlocked the device after a restart: what a background sync needs.
    case completeUntilFirstUserAuthentication
    /// Readable only while the device is unlocked: background polls cannot save while it is locked.
    case complete
  }

  /// The file.
  public let url: URL
  /// The data protection class the file is written with.
  public let protection: Protection

  /// Creates a store for the file at `url`.
  /// - Parameters:
  ///   - url: The file; its folder is created when missing.
  ///   - protection: The data protection class on the platforms that have one.
  public init(url: URL, protection: Protection = .systemDefault) {
    self.url = url
    self.protection = protection
  }

  private var folder: URL { url.deletingLastPathComponent() }
  private var temporaryPrefix: String { ".\(url.lastPathComponent)." }

  public func load() throws(PersistenceError) -> Data? {
    removeLeftoverTemporaryFiles()
    guard FileManager.default.fileExists(atPath: url.path) else { return nil }
    do {
      return try Data(contentsOf: url)
    } catch {
      throw .unreadable("cannot read \(url.path): \(error)")
    }
  }

  /// Removes the temporary files a crash in the middle of ``save(_:)`` left behind.
  private func removeLeftoverTemporaryFiles() {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return }
    for name in names where name.hasPrefix(temporaryPrefix) && name.hasSuffix(".tmp") {
      try? FileManager.default.removeItem(at: folder.appendingPathComponent(name))
    }
  }

  public func save(_ data: Data) throws(PersistenceError) {
    do {
      try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    } catch {
      throw .writeFailed("cannot create the folder \(folder.path): \(error)")
    }
    let temporary = folder.appendingPathComponent("\(temporaryPrefix)\(UUID().uuidString).tmp")
    guard FileManager.default.createFile(atPath: temporary.path, contents: data, attributes: attributes) else {
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

  private var attributes: [FileAttributeKey: Any]? {
    #if os(iOS) || os(watchOS) || os(tvOS) || os(visionOS)
      switch protection {
      case .systemDefault: return nil
      case .completeUntilFirstUserAuthentication:
        return [.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication]
      case .complete: return [.protectionKey: FileProtectionType.complete]
      }
    #else
      return nil
    #endif
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
