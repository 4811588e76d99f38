import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// An exclusive advisory lock on a file (`flock`), held until ``release()`` or the process ends: what keeps
/// a second server off a data directory (or a database file) another process is serving.
///
/// The system releases the lock when the process dies, however it dies (a SIGKILL included), so a crash
/// never leaves a stale lock behind. Two opens of the same file conflict even within one process.
///
/// ```swift
/// let lock = try ExclusiveFileLock.acquire(path: "data/event-server.lock")   // or throws `.held`
/// defer { lock.release() }
/// ```
public final class ExclusiveFileLock: Sendable {
  /// Why the lock could not be taken.
  public struct Failure: Error, Hashable, CustomStringConvertible {
    /// Whether another process (or another server in this one) holds it.
    public var isHeldElsewhere: Bool
    /// One line: the path and the reason.
    public var description: String
  }

  /// The open lock file; `nil` once released (so a second release closes nothing).
  private let descriptor: Mutex<Int32?>
  /// The lock file's path.
  public let path: String

  private init(descriptor: Int32, path: String) {
    self.descriptor = Mutex(descriptor)
    self.path = path
  }

  /// Takes the lock on the file at `path` (created when missing, with the process id written in it for
  /// the operator), without waiting.
  /// - Throws: ``Failure`` with ``Failure/isHeldElsewhere`` when another holder has it; otherwise the system's
  ///   reason (the folder does not exist, no permission).
  public static func acquire(path: String) throws(Failure) -> ExclusiveFileLock {
    let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
    guard descriptor >= 0 else {
      throw Failure(isHeldElsewhere: false, description: "cannot open \(path): \(String(cString: strerror(errno)))")
    }
    guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
      let reason = errno
      let holder = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
      _ = close(descriptor)
      if reason == EWOULDBLOCK {
        let who = holder.map { $0.isEmpty ? "" : " (pid \($0))" } ?? ""
        throw Failure(isHeldElsewhere: true, description: "\(path) is locked by another server\(who)")
      }
      throw Failure(isHeldElsewhere: false, description: "cannot lock \(path): \(String(cString: strerror(reason)))")
    }
    let pid = "\(getpid())\n"
    _ = ftruncate(descriptor, 0)
    _ = pid.withCString { pwrite(descriptor, $0, strlen($0), 0) }
    return ExclusiveFileLock(descriptor: descriptor, path: path)
  }

  /// Releases the lock (closing the file); the file stays. A second call does nothing.
  public func release() {
    if let open = descriptor.withLock({ $0.take() }) { _ = close(open) }
  }

  deinit {
    release()
  }
}
