import EventProtocol
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A store that keeps the record in one file, replaced atomically: the bytes go to a temporary file in the
/// same folder, which is flushed to disk (`fsync`) and renamed over the old one, and the folder is flushed.
///
/// Beside it, `<name>.journal` holds the entries appended since (see ``JournalingUpdateStore``): each append
/// writes one framed entry at the end and flushes it; each whole save starts a new journal bound to the new
/// record by its digest, so a journal left from an older record is never replayed onto a newer one.
///
/// The folder is created on the first save if it does not exist (Application Support does not exist on a
/// new iOS install). Temporary files left by a crash in the middle of a save are removed by ``load()``.
///
/// **One machine per file.** ``open()`` takes an advisory lock (`flock`) on `<name>.lock` beside the file
/// and keeps it until ``close()`` (the machine's `stop()`) or until every copy of the store is gone; the
/// system drops it when the process dies, so a crash never leaves the file locked. Another process (an app
/// extension sharing the container, a second copy of a tool) or another machine in this process gets
/// ``PersistenceError/inUse(_:)`` and its machine stops (`StopReason.storeInUse`) without reading or
/// writing: two engines on one record would take each other's mutation ids and could apply a write twice.
///
/// ```swift
/// let store = FileStore(
///   url: URL.applicationSupportDirectory.appending(path: "Sync/videos.json"),
///   protection: .completeUntilFirstUserAuthentication
/// )
/// ```
public struct FileStore: JournalingUpdateStore {
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
  private let lock: FileStoreLock

  /// Creates a store for the file at `url`.
  /// - Parameters:
  ///   - url: The file; its folder is created when missing.
  ///   - protection: The data protection class on the platforms that have one.
  public init(url: URL, protection: Protection = .systemDefault) {
    self.url = url
    self.protection = protection
    self.lock = FileStoreLock(path: url.appendingPathExtension("lock").path)
  }

  /// The journal of entries appended after the record.
  public var journalURL: URL { url.appendingPathExtension("journal") }

  /// The lock file beside the record.
  public var lockURL: URL { url.appendingPathExtension("lock") }

  /// Takes the file for this store (and its copies) until ``close()``.
  /// - Throws: ``PersistenceError/inUse(_:)`` when another process or another store holds it;
  ///   ``PersistenceError/writeFailed(_:)`` when the lock file cannot be created.
  public func open() throws(PersistenceError) {
    do {
      try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    } catch {
      throw .writeFailed("cannot create the folder \(folder.path): \(error)")
    }
    try lock.acquire()
  }

  /// Releases the file.
  public func close() {
    lock.release()
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

  /// Removes the temporary files a crash in the middle of ``save(_:)`` left behind: this store's own
  /// (`.<name>.<uuid>.tmp`), and Foundation's atomic-write temporaries (`.dat.nosync<pid>.<random>`) that
  /// builds before the store wrote through its own names left in the folder. Foundation names those after
  /// no file, so only ones untouched for ``foreignTemporaryAge`` go: another component writing in the same
  /// folder right now keeps its own.
  private func removeLeftoverTemporaryFiles(now: Date = Date()) {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return }
    for name in names {
      let path = folder.appendingPathComponent(name)
      if name.hasPrefix(temporaryPrefix) && name.hasSuffix(".tmp") {
        try? FileManager.default.removeItem(at: path)
      } else if name.hasPrefix(".dat.nosync"),
        let modified = (try? FileManager.default.attributesOfItem(atPath: path.path))?[.modificationDate] as? Date,
        now.timeIntervalSince(modified) > Self.foreignTemporaryAge
      {
        try? FileManager.default.removeItem(at: path)
      }
    }
  }

  /// How long a Foundation atomic-write temporary must have been left untouched before a load removes it
  /// (10 minutes: no write takes that long).
  static var foreignTemporaryAge: TimeInterval { 600 }

  public func save(_ data: Data) throws(PersistenceError) {
    do {
      try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    } catch {
      throw .writeFailed("cannot create the folder \(folder.path): \(error)")
    }
    try replace(url, with: data)
    // The record's rename is on disk before the new journal's: a crash between them leaves the new record
    // with the old journal (bound to the old record, so ignored), never the old record with the new journal.
    try replace(journalURL, with: JournalFormat.header(for: data))
  }

  /// Writes `data` to a temporary file, flushes it, renames it over `destination` and flushes the folder.
  private func replace(_ destination: URL, with data: Data) throws(PersistenceError) {
    let temporary = folder.appendingPathComponent("\(temporaryPrefix)\(UUID().uuidString).tmp")
    do {
      // Our own temporary name, which load() cleans up after a crash (Foundation's atomic writes leave theirs).
      try DurableFile.save(data, to: temporary.path, appending: false)
      if let attributes { try FileManager.default.setAttributes(attributes, ofItemAtPath: temporary.path) }
    } catch {
      try? FileManager.default.removeItem(at: temporary)
      throw .writeFailed("cannot write \(temporary.path): \(error)")
    }
    guard rename(temporary.path, destination.path) == 0 else {
      let reason = String(cString: strerror(errno))
      try? FileManager.default.removeItem(at: temporary)
      throw .writeFailed("cannot rename over \(destination.path): \(reason)")
    }
    DurableFile.syncFolder(folder.path)
  }

  public func appendToJournal(_ entry: Data) throws(PersistenceError) {
    guard FileManager.default.fileExists(atPath: journalURL.path) else {
      throw .writeFailed("no journal at \(journalURL.path)")
    }
    do {
      // A short write leaves a torn frame, which the next load drops (and cuts off).
      try DurableFile.save(JournalFormat.frame(entry), to: journalURL.path, appending: true)
    } catch {
      throw .writeFailed("cannot append to the journal: \(error)")
    }
  }

  public func loadJournal(after record: Data) throws(PersistenceError) -> [Data]? {
    guard FileManager.default.fileExists(atPath: journalURL.path) else { return nil }
    let journal: Data
    do {
      journal = try Data(contentsOf: journalURL)
    } catch {
      throw .unreadable("cannot read \(journalURL.path): \(error)")
    }
    guard let (entries, goodLength) = JournalFormat.parse(journal, boundTo: record) else { return nil }
    if goodLength < journal.count {
      // Cut the torn tail off, so the next entry follows the last good one.
      guard truncate(journalURL.path, off_t(goodLength)) == 0 else {
        throw .writeFailed("cannot cut the torn tail of \(journalURL.path): \(String(cString: strerror(errno)))")
      }
    }
    return entries
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
    // The journal goes with its record (it is bound to it, and useless to any other).
    try? FileManager.default.moveItem(at: journalURL, to: destination.appendingPathExtension("journal"))
    return destination.path
  }
}

/// The advisory lock a ``FileStore`` and its copies hold on `<name>.lock`: the open descriptor under a
/// mutex, released by ``release()`` or when the last copy goes.
private final class FileStoreLock: Sendable {
  private let path: String
  private let descriptor = Mutex<Int32?>(nil)

  init(path: String) {
    self.path = path
  }

  func acquire() throws(PersistenceError) {
    let result: PersistenceError? = descriptor.withLock { held in
      guard held == nil else { return nil }
      let fd = Foundation.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
      guard fd >= 0 else { return .writeFailed("cannot open the lock file \(path): errno \(errno)") }
      guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
        let reason = errno
        _ = Foundation.close(fd)
        if reason == EWOULDBLOCK {
          return .inUse("\(path) is held by another process or another machine: one machine per store")
        }
        return .writeFailed("cannot lock \(path): errno \(reason)")
      }
      held = fd
      return nil
    }
    if let result { throw result }
  }

  func release() {
    descriptor.withLock { held in
      guard let fd = held else { return }
      _ = flock(fd, LOCK_UN)
      _ = Foundation.close(fd)
      held = nil
    }
  }

  deinit {
    release()
  }
}
