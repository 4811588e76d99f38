import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Writing files so that what is written is on disk, with POSIX calls only: Foundation's `createFile` and
/// atomic writes go through a hidden temporary of their own (`.dat.nosync…` on Linux) that a kill leaves
/// behind, under a name the caller cannot know to clean up. Callers pick their own temporary names.
///
/// ```swift
/// try DurableFile.save(data, to: temporaryPath, appending: false)   // created, written, fsynced
/// ```
public enum DurableFile {
  /// Why a write failed: the path and the system's reason.
  public struct Failure: Error, CustomStringConvertible {
    /// What failed, with `strerror`'s text.
    public var description: String
  }

  /// Writes `data` to the file at `path` and flushes it (`fsync`): appended at its end when `appending`
  /// (the file is created when missing), or to a new file that must not exist yet otherwise.
  /// - Throws: ``Failure`` naming the path and the reason; a short write may have left part of `data`.
  public static func save(_ data: Data, to path: String, appending: Bool) throws(Failure) {
    let flags = O_WRONLY | O_CREAT | (appending ? O_APPEND : O_EXCL)
    let descriptor = open(path, flags, 0o644)
    guard descriptor >= 0 else { throw failure("cannot open \(path)") }
    defer { _ = close(descriptor) }
    let written = data.withUnsafeBytes { buffer -> Bool in
      var offset = 0
      while offset < buffer.count {
        let count = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { return false }
        offset += count
      }
      return true
    }
    guard written else { throw failure("cannot write \(path)") }
    guard fsync(descriptor) == 0 else { throw failure("cannot flush \(path)") }
  }

  /// Replaces the file at `path` with `data`: written and flushed under `temporary` (a name of the caller's,
  /// which it cleans up after a crash), renamed over `path`, and the folder flushed.
  /// - Throws: ``Failure``; the temporary is removed and `path` is unchanged.
  public static func replace(_ path: String, with data: Data, through temporary: String) throws(Failure) {
    unlink(temporary)
    do {
      try save(data, to: temporary, appending: false)
    } catch {
      unlink(temporary)
      throw error
    }
    guard rename(temporary, path) == 0 else {
      let error = failure("cannot rename \(temporary) over \(path)")
      unlink(temporary)
      throw error
    }
    syncFolder((path as NSString).deletingLastPathComponent)
  }

  /// Flushes a folder, so a rename or a new file in it is on disk.
  public static func syncFolder(_ path: String) {
    let folder = open(path, O_RDONLY)
    guard folder >= 0 else { return }
    _ = fsync(folder)
    _ = close(folder)
  }

  private static func failure(_ what: String) -> Failure {
    Failure(description: "\(what): \(String(cString: strerror(errno)))")
  }
}
